//! The bench's clock and its stop: whole seconds, sleeping until one, the periods a task may
//! have, and an operator's interrupt.

use chrono::{DateTime, Utc};

pub fn parse_period(text: &str) -> Result<u32, String> {
    let period: u32 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a whole number of seconds"))?;
    let divides_a_minute = period > 0 && 60 % period == 0;
    let minutes_dividing_an_hour = period.is_multiple_of(60) && period > 0 && 3600 % period == 0;
    if !(divides_a_minute || minutes_dividing_an_hour) {
        return Err(
            "must divide 60 (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30 or 60) or be whole minutes \
             dividing an hour (120, 180, …, 1800, 3600)"
                .into(),
        );
    }
    Ok(period)
}

/// The first whole second at or after `at`.
pub fn next_whole_second(at: DateTime<Utc>) -> DateTime<Utc> {
    let secs = at.timestamp() + i64::from(at.timestamp_subsec_nanos() > 0);
    DateTime::from_timestamp(secs, 0).unwrap_or(at)
}

pub async fn sleep_until(at: DateTime<Utc>) {
    let wait = (at - Utc::now()).to_std().unwrap_or_default();
    actix_rt::time::sleep(wait).await;
}

/// The first SIGINT or SIGTERM, named.
pub async fn interrupted() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => tokio::select! {
            _ = tokio::signal::ctrl_c() => "SIGINT",
            _ = term.recv() => "SIGTERM",
        },
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            "SIGINT"
        }
    }
}
