//! Registering the bench's tasks: through `POST /api/tasks/bulk`, a thousand a call, calls
//! spread over the ax processes, a few at once.

use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use futures_util::future::join_all;
use serde_json::{json, Value};

use ax_cron::CronSchedule;

use crate::load::db::BenchStore;
use crate::measure::analysis::task_cron;

/// Bulk registration calls in flight at once.
const REGISTER_CONCURRENCY: usize = 4;

/// Registers the tasks through `POST /api/tasks/bulk`, a thousand a call, calls spread over
/// the ax processes; then reads their ids from the store.
pub async fn register_tasks(
    ax_urls: &[String],
    target: &Value,
    count: u32,
    period: u32,
    store: &BenchStore,
) -> anyhow::Result<Vec<(i64, CronSchedule)>> {
    let client = awc::Client::builder()
        .connector(awc::Connector::new().limit(REGISTER_CONCURRENCY))
        .timeout(Duration::from_secs(60))
        .finish();
    let client = &client;
    let registering = &progress(u64::from(count), "registering tasks");
    let calls: Vec<Vec<u32>> = (0..count)
        .collect::<Vec<u32>>()
        .chunks(BULK_ITEMS)
        .map(<[u32]>::to_vec)
        .collect();
    let lanes = (0..REGISTER_CONCURRENCY).map(|lane| {
        let calls = &calls;
        async move {
            for n in (lane..calls.len()).step_by(REGISTER_CONCURRENCY) {
                let ax_url = &ax_urls[n % ax_urls.len()];
                register_bulk(client, ax_url, target, &calls[n], period)
                    .await
                    .with_context(|| format!("cannot register tasks on {ax_url}"))?;
                registering.inc(calls[n].len() as u64);
            }
            anyhow::Ok(())
        }
    });
    for lane in join_all(lanes).await {
        lane?;
    }
    registering.finish_and_clear();
    let mut tasks = Vec::with_capacity(count as usize);
    for (id, name) in store.task_names().await? {
        let index: u32 = name
            .strip_prefix(TASK_NAME_PREFIX)
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| anyhow!("a task the bench did not register: `{name}`"))?;
        let cron = task_cron(index, period);
        let schedule = CronSchedule::parse(&cron).with_context(|| format!("bad cron `{cron}`"))?;
        tasks.push((id, schedule));
    }
    if tasks.len() != count as usize {
        bail!("{count} tasks registered, {} stored", tasks.len());
    }
    Ok(tasks)
}

/// Names of the bench's tasks: the prefix and the task's index.
const TASK_NAME_PREFIX: &str = "bench-";
/// Tasks per bulk call: the most the API takes.
const BULK_ITEMS: usize = 1000;

/// Registers the tasks of `indexes`, each dispatched to `target` (its `handlerUrl` or
/// `executor` field).
async fn register_bulk(
    client: &awc::Client,
    ax_url: &str,
    target: &Value,
    indexes: &[u32],
    period: u32,
) -> anyhow::Result<()> {
    let items: Vec<Value> = indexes
        .iter()
        .map(|&index| {
            let mut task = json!({
                "name": format!("{TASK_NAME_PREFIX}{index}"),
                "scene": "bench",
                "cron": task_cron(index, period),
                "timeoutMs": 30_000,
                "maxRetry": 0,
            });
            if let (Some(task), Some(target)) = (task.as_object_mut(), target.as_object()) {
                task.extend(target.clone());
            }
            task
        })
        .collect();
    // awc's errors are not `Send`: keep their text only.
    let mut response = client
        .post(format!("{ax_url}/api/tasks/bulk"))
        .send_json(&json!({"items": items}))
        .await
        .map_err(|err| anyhow!("{err}"))?;
    let bytes = response
        .body()
        .limit(1 << 20)
        .await
        .map_err(|err| anyhow!("reading the reply: {err}"))?;
    if response.status().as_u16() != 200 {
        bail!(
            "HTTP {}: {}",
            response.status(),
            String::from_utf8_lossy(&bytes)
        );
    }
    Ok(())
}

pub fn progress(total: u64, what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(total);
    let style = indicatif::ProgressStyle::with_template(&format!(
        "{what} [{{bar:40}}] {{pos}}/{{len}} {{elapsed}}"
    ))
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style.progress_chars("=> "));
    bar
}
