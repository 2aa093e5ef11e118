//! Alerts out: each second, the run ends the database recorded are folded into the outbox,
//! and the outbox's due rows are claimed and sent to their channels, off every run path.
//! Each channel has a sender per lane (its own rounds and connections): a channel that is
//! slow or hangs holds only its own sends, and a backlog of alerts about members and
//! processes never delays those about runs. What an alert
//! says is `ax_core::alerting`'s; which rows are due and how a send settles is the store's.

use ax_core::ids::ProcessId;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use chrono::Utc;

use super::redis_link::{RedisLink, CALL_WAIT};
use super::resolver::guarded_client;
use super::store::{boxed, StoreHandle};
use crate::notify::email::{self, Mail};
use ax_core::alerting::{
    expand, retry_at, Alert, AlertEvent, AlertLane, AlertRule, Channel, ChannelKind, Outage,
    OutageVerdict,
};
use ax_core::metrics::{add, metrics};
use ax_core::security::{sign_dispatch, Allowlist, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use ax_store::from_db;
use ax_store::queries::alerts::{self, AlertRow};

/// Most alerts one process sends at once.
const SEND_BATCH: i64 = 50;
/// Most folds a round makes: with a batch of [`alerts::FOLD_BATCH`] each, 10,000 run ends a
/// round.
const FOLDS_PER_ROUND: usize = 20;

/// How alerts are folded and sent.
#[derive(Debug, Clone)]
pub struct AlertSettings {
    pub channels: Vec<Channel>,
    pub rule: AlertRule,
    /// Where runs' console pages are: a run's page is this and its request id (the console's
    /// address, see `cluster::identity::reachable_at`, made by the app: actors know no pages).
    pub run_links: String,
    pub retry_for: chrono::Duration,
    pub send_timeout: Duration,
    pub claimant: ProcessId,
    /// How long the store or Redis may be out of reach before it alerts.
    pub outage_after: chrono::Duration,
    /// How long events about the members of a group (or about processes) gather before
    /// they go out as one alert.
    pub group_window: chrono::Duration,
}

pub struct AlertActor {
    settings: Arc<AlertSettings>,
    store: StoreHandle,
    /// Checked each round when there is one.
    redis: Option<RedisLink>,
    store_outage: Outage,
    redis_outage: Outage,
    secret: Arc<[u8]>,
    allowlist: Allowlist,
    /// The outage's and the test's alerts' connections.
    client: Option<Rc<awc::Client>>,
    /// One per channel and lane.
    senders: Vec<Sender>,
    /// A round of folding run ends into the outbox is under way.
    folding: bool,
}

/// The sends of one channel's alerts of one lane: a round at a time, on connections of its
/// own.
struct Sender {
    lane: AlertLane,
    channel: String,
    client: Rc<awc::Client>,
    busy: bool,
}

impl AlertActor {
    pub fn new(
        settings: AlertSettings,
        (store, redis): (StoreHandle, Option<RedisLink>),
        secret: Arc<[u8]>,
        allowlist: Allowlist,
    ) -> Self {
        AlertActor {
            settings: Arc::new(settings),
            store,
            redis,
            store_outage: Outage::default(),
            redis_outage: Outage::default(),
            secret,
            allowlist,
            client: None,
            senders: Vec::new(),
            folding: false,
        }
    }
}

impl Actor for AlertActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // Channel URLs are held to the handler allowlist's rules, also at connect time.
        let timeout = self.settings.send_timeout;
        let limit = usize::try_from(SEND_BATCH).unwrap_or(1);
        let client = || guarded_client(self.allowlist.clone(), limit, timeout, Some(timeout));
        self.client = Some(Rc::new(client()));
        self.senders = [AlertLane::Runs, AlertLane::Others]
            .into_iter()
            .flat_map(|lane| self.settings.channels.iter().map(move |c| (lane, c)))
            .map(|(lane, channel)| Sender {
                lane,
                channel: channel.name.clone(),
                client: Rc::new(client()),
                busy: false,
            })
            .collect();
        let enabled = !self.settings.channels.is_empty();
        let store = self.store.clone();
        ctx.spawn(
            async move {
                if let Err(err) = store
                    .query(move |conn| boxed(alerts::set_enabled(conn, enabled)))
                    .await
                {
                    log::warn!("alerts: could not record whether they are on: {err}");
                }
            }
            .into_actor(self),
        );
        if enabled {
            ctx.run_interval(Duration::from_secs(1), |actor, ctx| {
                actor.fold(ctx);
                actor.send(AlertLane::Others, ctx);
            });
        }
    }
}

impl AlertActor {
    /// One round of folding run ends into the outbox, then the alerts about runs are sent;
    /// the next round waits for this one.
    fn fold(&mut self, ctx: &mut Context<Self>) {
        if self.folding {
            return;
        }
        self.folding = true;
        let (settings, store) = (self.settings.clone(), self.store.clone());
        let redis = self.redis.clone();
        ctx.spawn(
            async move {
                let redis_up = match redis {
                    Some(link) => Some(redis_answers(link).await),
                    None => None,
                };
                let folded = fold_all(&settings, &store).await;
                if let Err(err) = &folded {
                    log::warn!("alerts: {err}");
                }
                let store_up = !folded.is_err_and(|err| err.is_unreachable());
                (store_up, redis_up)
            }
            .into_actor(self)
            .map(|(store_up, redis_up), actor, ctx| {
                actor.folding = false;
                actor.observe_store(store_up, ctx);
                if let Some(up) = redis_up {
                    actor.observe_redis(up, ctx);
                }
                actor.send(AlertLane::Runs, ctx);
            }),
        );
    }

    /// A round of sending `lane`'s due alerts for each channel whose last round is over.
    fn send(&mut self, lane: AlertLane, ctx: &mut Context<Self>) {
        let idle = self.senders.iter_mut().enumerate();
        let idle = idle.filter(|(_, sender)| sender.lane == lane && !sender.busy);
        let mut rounds = Vec::new();
        for (index, sender) in idle {
            sender.busy = true;
            let (settings, store, secret) = (
                self.settings.clone(),
                self.store.clone(),
                self.secret.clone(),
            );
            let (channel, client) = (sender.channel.clone(), sender.client.clone());
            rounds.push((index, async move {
                let sender = (&settings, &store, &*client, &secret[..]);
                if let Err(err) = send_due(sender, (lane, &channel)).await {
                    log::warn!("alerts: {err}");
                }
            }));
        }
        for (index, round) in rounds {
            ctx.spawn(
                round
                    .into_actor(self)
                    .map(move |(), actor, _| actor.senders[index].busy = false),
            );
        }
    }

    /// The store out of reach is told from this process straight to the default rule's
    /// channels: no outbox can keep it. Each process that cannot reach it tells its own.
    fn observe_store(&mut self, up: bool, ctx: &mut Context<Self>) {
        let after = self.settings.outage_after;
        let Some(verdict) = self.store_outage.observe(up, Utc::now(), after) else {
            return;
        };
        let (event, since) = match verdict {
            OutageVerdict::Down { since } => (AlertEvent::StoreUnreachable, since),
            OutageVerdict::Back { since } => (AlertEvent::Resolved, since),
        };
        let settings = self.settings.clone();
        if !settings.rule.wants(event) {
            return;
        }
        let Some(client) = self.client.clone() else {
            return;
        };
        let secret = self.secret.clone();
        let alert = outage_alert(&settings.claimant, event, since);
        ctx.spawn(
            async move {
                for channel in settings.rule.channels.iter() {
                    let Some(channel) = settings.channels.iter().find(|c| &c.name == channel)
                    else {
                        continue;
                    };
                    let sent = send_to(channel, (&client, settings.send_timeout), &secret, &alert);
                    match sent.await {
                        Ok(()) => metrics().alerts_sent.fetch_add(1, Ordering::Relaxed),
                        Err(error) => {
                            log::warn!("alert {} on {}: {error}", alert.id, channel.name);
                            metrics().alerts_failed.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                }
            }
            .into_actor(self),
        );
    }

    /// Redis out of reach is recorded in the store (which folds what several processes
    /// record), and its return resolves it.
    fn observe_redis(&mut self, up: bool, ctx: &mut Context<Self>) {
        let after = self.settings.outage_after;
        let Some(verdict) = self.redis_outage.observe(up, Utc::now(), after) else {
            return;
        };
        let (event, message) = match verdict {
            OutageVerdict::Down { since } => {
                let since = since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                let message = format!("unreachable from {} since {since}", self.settings.claimant);
                (AlertEvent::RedisUnreachable, Some(message))
            }
            OutageVerdict::Back { .. } => (AlertEvent::Resolved, None),
        };
        let store = self.store.clone();
        ctx.spawn(
            async move {
                let recorded = store
                    .query(move |conn| {
                        boxed(async move {
                            alerts::record(conn, "redis", event, message, Utc::now()).await
                        })
                    })
                    .await;
                if let Err(err) = recorded {
                    log::warn!("alerts: Redis's outage not recorded: {err}");
                }
            }
            .into_actor(self),
        );
    }
}

/// Whether Redis answers a PING within [`CALL_WAIT`] (false at once while the link counts it
/// out of reach).
async fn redis_answers(link: RedisLink) -> bool {
    let ping = link.call(CALL_WAIT, async |conn| {
        add(&metrics().redis_commands, 1);
        redis::cmd("PING").query_async::<String>(&mut *conn).await
    });
    ping.await.is_ok()
}

/// The alert of this process's store outage that began `since`: the same id on every
/// channel.
fn outage_alert(process: &str, event: AlertEvent, since: chrono::DateTime<Utc>) -> Alert {
    let key = format!(
        "ax-outage:store:{process}:{}:{event}",
        since.timestamp_millis()
    );
    let since_text = since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let message = match event {
        AlertEvent::Resolved => format!("reachable again (out of reach since {since_text})"),
        _ => format!("out of reach since {since_text}; runs are not fired meanwhile"),
    };
    Alert {
        id: uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, key.as_bytes()).to_string(),
        event,
        subject: format!("store (from process {process})"),
        task_id: None,
        scene: None,
        link: None,
        request_id: None,
        code: None,
        message: Some(message),
        count: 1,
        folded: 0,
        folded_since: None,
        at: Utc::now(),
    }
}

/// Folds the run ends recorded since the last round into the outbox.
async fn fold_all(
    settings: &Arc<AlertSettings>,
    store: &StoreHandle,
) -> Result<(), ax_store::StoreError> {
    // A full batch leaves more queued: fold on (bounded, so sending still gets its turn),
    // or failures arriving faster than a batch a round would pile up.
    for _ in 0..FOLDS_PER_ROUND {
        let (rule, folder) = (settings.rule.clone(), settings.claimant.clone());
        let window = settings.group_window;
        let taken = store
            .query(move |conn| {
                boxed(async move { alerts::fold(conn, &folder, &rule, (window, Utc::now())).await })
            })
            .await?;
        if taken < alerts::FOLD_BATCH {
            break;
        }
    }
    Ok(())
}

/// Claims the due alerts of `lane` on `channel` and sends them, each settled as it went.
async fn send_due(
    (settings, store, client, secret): (&Arc<AlertSettings>, &StoreHandle, &awc::Client, &[u8]),
    (lane, channel): (AlertLane, &str),
) -> Result<(), ax_store::StoreError> {
    let claimant = settings.claimant.clone();
    let channel = channel.to_string();
    let claim_for = chrono::Duration::from_std(settings.send_timeout * 2)
        .unwrap_or(chrono::Duration::seconds(60));
    let due = store
        .query(move |conn| {
            boxed(async move {
                let now = Utc::now();
                let until = now + claim_for;
                let sender = (claimant.as_str(), lane, channel.as_str());
                alerts::claim_due(conn, sender, now, until, SEND_BATCH).await
            })
        })
        .await?;
    let sends = due.iter().map(|row| async move {
        let sent = send(settings, client, secret, row).await;
        (row, sent)
    });
    let outcomes = futures_util::future::join_all(sends).await;
    let mut sent: HashMap<&str, Vec<&str>> = HashMap::new();
    for (row, outcome) in outcomes {
        match outcome {
            Ok(()) => {
                metrics().alerts_sent.fetch_add(1, Ordering::Relaxed);
                sent.entry(&row.channel).or_default().push(&row.id);
            }
            Err(error) => {
                let now = Utc::now();
                let retry_at =
                    retry_at(from_db(row.created_at), row.tries, settings.retry_for, now);
                if retry_at.is_none() {
                    metrics().alerts_failed.fetch_add(1, Ordering::Relaxed);
                }
                log::warn!("alert {} on {}: {error}", row.id, row.channel);
                let (id, channel, claimant) = (
                    row.id.clone(),
                    row.channel.clone(),
                    settings.claimant.clone(),
                );
                store
                    .query(move |conn| {
                        boxed(async move {
                            let key = (id.as_str(), channel.as_str());
                            alerts::settle_failed(conn, key, &claimant, (&error, retry_at)).await
                        })
                    })
                    .await?;
            }
        }
    }
    // The sent ones settle in a statement per channel.
    for (channel, ids) in sent {
        let channel = channel.to_string();
        let ids: Vec<String> = ids.into_iter().map(str::to_string).collect();
        let claimant = settings.claimant.clone();
        store
            .query(move |conn| {
                boxed(async move {
                    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
                    alerts::settle_sent(conn, &channel, &ids, &claimant, Utc::now()).await
                })
            })
            .await?;
    }
    Ok(())
}

/// `POST /api/alerts/test`: a test alert to one channel, sent now; its id once delivered.
#[derive(Message)]
#[rtype(result = "Result<String, TestError>")]
pub struct TestChannel(pub String);

/// Why a test alert was not delivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TestError {
    #[error("no channel `{name}`: {known}")]
    NoChannel { name: String, known: String },
    #[error("the channel did not take the alert: {0}")]
    Failed(String),
}

impl Handler<TestChannel> for AlertActor {
    type Result = ResponseActFuture<Self, Result<String, TestError>>;

    fn handle(&mut self, TestChannel(name): TestChannel, _: &mut Context<Self>) -> Self::Result {
        let channels = &self.settings.channels;
        let Some(channel) = channels.iter().find(|c| c.name == name).cloned() else {
            let names: Vec<&str> = channels.iter().map(|c| c.name.as_str()).collect();
            let known = if names.is_empty() {
                "none is configured (alerts.channels)".to_string()
            } else {
                format!("the configured ones are {}", names.join(", "))
            };
            return Box::pin(fut::ready(Err(TestError::NoChannel { name, known })));
        };
        let (client, secret) = (self.client.clone(), self.secret.clone());
        let timeout = self.settings.send_timeout;
        let alert = test_alert(&name);
        Box::pin(
            async move {
                let client = client.ok_or_else(|| TestError::Failed("not started".into()))?;
                send_to(&channel, (&client, timeout), &secret, &alert)
                    .await
                    .map_err(TestError::Failed)?;
                Ok(alert.id)
            }
            .into_actor(self),
        )
    }
}

/// A test alert: it says it is one.
fn test_alert(channel: &str) -> Alert {
    Alert {
        id: uuid::Uuid::new_v4().to_string(),
        event: AlertEvent::Test,
        subject: format!("channel {channel}"),
        task_id: None,
        scene: None,
        link: None,
        request_id: None,
        code: None,
        message: Some("a test alert from ax: this channel is set up".into()),
        count: 1,
        folded: 0,
        folded_since: None,
        at: Utc::now(),
    }
}

/// The alert a row tells, linked to its run's page (`run_links` and its request id).
pub fn alert_of(row: &AlertRow, run_links: &str) -> Alert {
    let link = row.request_id.as_ref().map(|id| format!("{run_links}{id}"));
    Alert {
        id: row.id.clone(),
        event: row.event,
        subject: row.subject.clone(),
        task_id: row.task_id.map(|id| id.0),
        scene: row.scene.clone(),
        link,
        request_id: row.request_id.clone(),
        code: row.code.clone(),
        message: row.message.clone(),
        count: u32::try_from(row.count).unwrap_or(0),
        folded: u32::try_from(row.folded).unwrap_or(0),
        folded_since: row.folded_since.map(from_db),
        at: from_db(row.at),
    }
}

/// Sends one alert to its channel; the error in words that hold no secret.
async fn send(
    settings: &AlertSettings,
    client: &awc::Client,
    secret: &[u8],
    row: &AlertRow,
) -> Result<(), String> {
    let Some(channel) = settings.channels.iter().find(|c| c.name == row.channel) else {
        return Err(format!(
            "no channel `{}` is configured any more",
            row.channel
        ));
    };
    let alert = alert_of(row, &settings.run_links);
    send_to(channel, (client, settings.send_timeout), secret, &alert).await
}

/// Sends `alert` to `channel` (also what `POST /api/alerts/test` does).
pub async fn send_to(
    channel: &Channel,
    (client, timeout): (&awc::Client, Duration),
    secret: &[u8],
    alert: &Alert,
) -> Result<(), String> {
    let env = |name: &str| std::env::var(name).ok();
    let unset = |name| format!("environment variable {name} is not set");
    if channel.kind == ChannelKind::Email {
        let smtp = expand(channel.smtp.as_deref().unwrap_or_default(), env).map_err(unset)?;
        let (subject, text, html) = alert.email();
        let mail = Mail {
            subject,
            text,
            html,
        };
        let (from, ca_file) = (channel.from.as_deref(), channel.ca_file.as_deref());
        return email::send(&smtp, from, &channel.to, ca_file, timeout, &mail)
            .await
            .map_err(|err| err.to_string());
    }
    let url = expand(channel.url.as_deref().unwrap_or_default(), env).map_err(unset)?;
    let body = match (channel.kind, &channel.template) {
        (ChannelKind::Slack, _) => alert.slack_body().to_string(),
        (_, Some(template)) => alert.templated(template).map_err(|err| err.to_string())?,
        _ => alert.webhook_body().to_string(),
    };
    let timestamp = Utc::now().timestamp();
    let response = client
        .post(url.as_str())
        .insert_header(("Content-Type", "application/json"))
        .insert_header(("X-Ax-Alert-Id", alert.id.as_str()))
        .insert_header((TIMESTAMP_HEADER, timestamp.to_string()))
        .insert_header((
            SIGNATURE_HEADER,
            sign_dispatch(secret, timestamp, body.as_bytes()),
        ))
        .send_body(body)
        .await
        .map_err(|err| format!("{}: {err}", host_of(&url)))?;
    match response.status() {
        status if status.is_success() => Ok(()),
        status => Err(format!("the channel answered HTTP {}", status.as_u16())),
    }
}

/// A channel URL's host and port: its path and query may hold a secret (Slack's do).
fn host_of(url: &str) -> String {
    url::Url::parse(url).map_or_else(
        |_| "the channel URL".to_string(),
        |url| {
            format!(
                "{}:{}",
                url.host_str().unwrap_or(""),
                url.port_or_known_default().unwrap_or(0)
            )
        },
    )
}
