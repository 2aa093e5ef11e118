//! Alerts one can act on: every channel's link opens the run's page in the console (the
//! address ax serves on, or `alerts.console_url`); the one line a webhook, Slack and an email's
//! subject carry says the code, the message and the link; a webhook template writes every
//! value JSON-escaped, so a hostile task name or message leaves its body valid with its keys.

use std::time::{Duration, Instant};

use ax_core::alerting::ChannelKind;
use serde_json::{json, Value};

use super::webhook::{channel, with_channels};
use crate::common::smtp::{self, SmtpSink};
use crate::common::{free_port, start_ax, Api, Executor, Received, Reply, TestStore};

/// A task name and an executor's message that close the JSON string they are put in.
const HOSTILE_NAME: &str = r#"x", "injected": "yes"#;
const HOSTILE_MESSAGE: &str = r#""}, "evil": "1"#;
const CODE: &str = "E_UPSTREAM";
/// A template that puts values inside JSON strings, as people write them.
const NAIVE_TEMPLATE: &str =
    r#"{"subject": "{{ subject }}", "message": "{{ message }}", "text": "{{ text }}"}"#;

/// The reply of an executor that fails with the hostile message.
fn failing_reply() -> Reply {
    let body =
        json!({"status": "FAILED", "code": CODE, "message": HOSTILE_MESSAGE, "retry": false});
    Reply::Body(body.to_string())
}

/// A webhook, a templated webhook, Slack and email channels, each with its receiver.
struct Receivers {
    hook: Executor,
    templated: Executor,
    slack: Executor,
    mail: SmtpSink,
}

impl Receivers {
    async fn start() -> Receivers {
        Receivers {
            hook: Executor::start(Reply::Success).await,
            templated: Executor::start(Reply::Success).await,
            slack: Executor::start(Reply::Success).await,
            mail: smtp::start(None).await,
        }
    }

    fn channels(&self) -> Vec<ax_core::alerting::Channel> {
        let hook = channel("hook", ChannelKind::Webhook, self.hook.url.clone());
        let mut templated = channel(
            "templated",
            ChannelKind::Webhook,
            self.templated.url.clone(),
        );
        templated.template = Some(NAIVE_TEMPLATE.into());
        let slack = channel("slack", ChannelKind::Slack, self.slack.url.clone());
        let mut mail = channel("mail", ChannelKind::Email, String::new());
        mail.url = None;
        mail.smtp = Some(self.mail.url(None));
        mail.to = vec!["ops@example.com".into()];
        mail.ca_file = Some(self.mail.ca_file());
        vec![hook, templated, slack, mail]
    }

    /// The first request each webhook-like receiver got, and the first mail's data.
    async fn first_of_each(&self) -> (Received, Received, Received, String) {
        let within = Duration::from_secs(15);
        let hook = first(self.hook.wait_for(1, within).await);
        let templated = first(self.templated.wait_for(1, within).await);
        let slack = first(self.slack.wait_for(1, within).await);
        let deadline = Instant::now() + within;
        while self.mail.received().is_empty() && Instant::now() < deadline {
            actix_rt::time::sleep(Duration::from_millis(100)).await;
        }
        let mail = self.mail.received().first().expect("a mail").data.clone();
        (hook, templated, slack, mail)
    }
}

fn first(received: Vec<Received>) -> Received {
    received.into_iter().next().expect("an alert")
}

/// GETs `link` as a browser following it would: its status and page.
async fn follow(link: &str) -> (u16, String) {
    let client = awc::Client::builder()
        .timeout(Duration::from_secs(10))
        .finish();
    let mut response = client.get(link).send().await.expect("the link answers");
    let page = response.body().limit(8 << 20).await.expect("the page");
    (
        response.status().as_u16(),
        String::from_utf8_lossy(&page).into_owned(),
    )
}

/// Asserts `link` opens the console's page of `request_id`.
async fn opens_the_run(link: &str, request_id: &str, channel: &str) {
    assert!(
        link.ends_with(&format!("/console/runs/{request_id}")),
        "{channel}'s link: {link}"
    );
    let (status, page) = follow(link).await;
    assert_eq!(status, 200, "{channel}'s link {link}: {page}");
    assert!(
        page.contains(request_id) && page.contains("Run"),
        "{channel}'s link {link} is not the run's page: {page}"
    );
}

/// The header `name` of a mail, its folded lines joined.
fn header(data: &str, name: &str) -> String {
    let head = data.split("\r\n\r\n").next().unwrap_or_default();
    let unfolded = head.replace("\r\n ", " ").replace("\r\n\t", " ");
    let prefix = format!("{name}: ");
    unfolded
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {name} in {data}"))
        .to_string()
}

/// The link at the end of an alert's one line (`… | http://…/console/runs/ID`).
fn link_in(line: &str) -> &str {
    line.rsplit(" | ").next().unwrap_or_default()
}

/// Every channel's alert for a failing task whose name and message are hostile: the link opens
/// the run, the one line carries the code, the message and the link, and the naive template
/// stays valid JSON with its own keys. Without `alerts.console_url`: the address ax serves on.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn every_channels_link_opens_the_run_and_its_line_says_why() {
    let store = TestStore::sqlite();
    let receivers = Receivers::start().await;
    let config = with_channels(&store, receivers.channels());
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let executor = Executor::start(failing_reply()).await;
    let task = api
        .create_task(
            json!({"name": HOSTILE_NAME, "scene": "billing", "cron": "* * * * * *",
            "handlerUrl": executor.url, "maxRetry": 0}),
        )
        .await;
    assert!(task["id"].is_i64(), "{task}");
    let (hook, templated, slack, mail) = receivers.first_of_each().await;
    let request_id = hook.body["requestId"].as_str().expect("a run").to_string();
    let subject = format!("billing/{HOSTILE_NAME}");

    // The webhook: its link, and its one line with the code, the message and the link.
    let link = hook.body["link"].as_str().expect("a link");
    assert!(
        link.starts_with(&format!("http://{}/console/runs/", ax.addr())),
        "the address ax serves on: {link}"
    );
    opens_the_run(link, &request_id, "the webhook").await;
    let text = hook.body["text"].as_str().expect("text");
    assert_eq!(
        text,
        format!("FAILED {subject}: {CODE} | {HOSTILE_MESSAGE} | {link}")
    );

    // The naive template: valid JSON, exactly its three keys, each value as it is.
    let body: Value = serde_json::from_slice(&templated.raw).unwrap_or_else(|err| {
        panic!(
            "not JSON ({err}): {}",
            String::from_utf8_lossy(&templated.raw)
        )
    });
    let keys: Vec<&String> = body.as_object().expect("an object").keys().collect();
    assert_eq!(keys, ["message", "subject", "text"], "{body}");
    assert_eq!(body["subject"], subject.as_str());
    assert_eq!(body["message"], HOSTILE_MESSAGE);
    assert_eq!(body["text"], text);

    // Slack: the same line as `text` (escaped as Slack reads it), the title linking the run.
    let slack_text = slack.body["text"].as_str().expect("text");
    assert!(
        slack_text.contains(&format!(": {CODE} | ")) && slack_text.contains(HOSTILE_MESSAGE),
        "{slack_text}"
    );
    opens_the_run(link_in(slack_text), &request_id, "Slack's text").await;
    let title = slack.body["attachments"][0]["title"]
        .as_str()
        .expect("title");
    let titled = title
        .strip_prefix('<')
        .and_then(|t| t.split('|').next())
        .expect("a linked title");
    opens_the_run(titled, &request_id, "Slack's title").await;

    // The email: its subject line carries the code, the message and the link.
    let subject_line = header(&mail, "Subject");
    assert!(
        subject_line.starts_with(&format!(
            "[ax] FAILED {subject}: {CODE} | {HOSTILE_MESSAGE} | "
        )),
        "{subject_line}"
    );
    opens_the_run(link_in(&subject_line), &request_id, "the email's subject").await;
    ax.shutdown().await;
}

/// With `alerts.console_url` (a name people reach, a trailing slash), the links are under it.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn links_are_under_the_configured_console_url() {
    let store = TestStore::mysql();
    let hook = Executor::start(Reply::Success).await;
    let mut config = with_channels(
        &store,
        vec![channel("hook", ChannelKind::Webhook, hook.url.clone())],
    );
    let port = free_port();
    config.server.port = port;
    config.alerts.console_url = Some(format!("http://localhost:{port}/"));
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let executor = Executor::start(failing_reply()).await;
    api.create_task(
        json!({"name": "charge-cards", "scene": "billing", "cron": "* * * * * *",
        "handlerUrl": executor.url, "maxRetry": 0}),
    )
    .await;
    let alert = first(hook.wait_for(1, Duration::from_secs(15)).await);
    let request_id = alert.body["requestId"].as_str().expect("a run");
    let link = alert.body["link"].as_str().expect("a link");
    assert_eq!(
        link,
        format!("http://localhost:{port}/console/runs/{request_id}")
    );
    opens_the_run(link, request_id, "the webhook").await;
    ax.shutdown().await;
}
