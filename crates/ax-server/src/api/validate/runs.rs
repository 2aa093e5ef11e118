//! Run inputs: a manual run's params and a backfill's range.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::body::{object, required_string};
use super::query::storable_time;
use super::task::params;
use crate::error::ApiError;

/// The optional body of a manual run: `{"params": {…}}`; returns the params as JSON text.
pub fn trigger_params(body: &[u8]) -> Result<Option<String>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let mut body = object(crate::api::json::parse(body)?, &["params"])?;
    match body.remove("params") {
        None | Some(Value::Null) => Ok(None),
        value => params(value).map(Some),
    }
}

/// A backfill body, `{"from": RFC3339, "to": RFC3339}`: the range `[from, to)`.
pub fn backfill_range(body: &[u8]) -> Result<(DateTime<Utc>, DateTime<Utc>), ApiError> {
    let mut body = object(crate::api::json::parse(body)?, &["from", "to"])?;
    let mut time = |name: &str| -> Result<DateTime<Utc>, ApiError> {
        let text = required_string(&mut body, name)?;
        let at = DateTime::parse_from_rfc3339(&text)
            .map_err(|_| ApiError::invalid(name, format!("{name} must be an RFC3339 time")))?
            .with_timezone(&Utc);
        storable_time(at, name)?;
        Ok(at)
    };
    let (from, to) = (time("from")?, time("to")?);
    if from >= to {
        return Err(ApiError::invalid("to", "to must be later than from"));
    }
    Ok((from, to))
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::refused::field_of;

    #[test]
    fn trigger_bodies() {
        assert_eq!(trigger_params(b"").unwrap(), None);
        assert_eq!(trigger_params(b"{}").unwrap(), None);
        assert_eq!(
            trigger_params(br#"{"params":{"a":1}}"#).unwrap().as_deref(),
            Some(r#"{"a":1}"#)
        );
        assert_eq!(
            field_of(trigger_params(br#"{"params":[1]}"#).unwrap_err()).as_deref(),
            Some("params")
        );
        assert_eq!(
            field_of(trigger_params(br#"{"p":1}"#).unwrap_err()).as_deref(),
            Some("p")
        );
        assert_eq!(field_of(trigger_params(b"\xff").unwrap_err()), None);
    }
}
