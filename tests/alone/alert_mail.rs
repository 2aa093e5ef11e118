//! An email channel through an in-process ax, its SMTP password read from the environment:
//! the test sets a variable of the process, so it runs here, alone.

use std::time::Duration;

use ax_core::alerting::ChannelKind;
use serde_json::json;

use crate::common::{
    alert_channel as channel, start_ax, unique_name, with_channels, Api, Executor, Reply, TestStore,
};

/// An email channel through ax: the failing task's alert arrives by SMTP (STARTTLS, AUTH), the
/// password taken from the environment.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_failing_task_alerts_by_email() {
    let _serial = crate::serial().await;
    let sink = crate::common::smtp::start(Some(("ax", "s3cret-pass"))).await;
    std::env::set_var("AX_TEST_SMTP_PASSWORD", "s3cret-pass");
    let store = TestStore::sqlite();
    let mut mail = channel("team-mail", ChannelKind::Email, String::new());
    mail.url = None;
    mail.smtp = Some(format!(
        "smtp://ax:${{AX_TEST_SMTP_PASSWORD}}@{}",
        sink.addr
    ));
    mail.to = vec!["ops@example.com".into()];
    mail.ca_file = Some(sink.ca_file());
    let ax = start_ax(&with_channels(&store, vec![mail])).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::FailNoRetry).await;
    let name = unique_name("mailed");
    api.create_task(json!({"name": name, "cron": "* * * * * *",
        "handlerUrl": executor.url, "maxRetry": 0}))
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while sink.received().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let received = sink.received();
    let first = received.first().expect("a mail");
    assert!(first.tls, "over STARTTLS");
    assert_eq!(first.user.as_deref(), Some("ax"));
    assert_eq!(first.to, ["ops@example.com"]);
    assert!(
        first.data.contains(&format!("FAILED default/{name}")),
        "{}",
        first.data
    );
    assert!(first.data.contains("text/html"), "text and HTML");
    ax.shutdown().await;
}
