//! The email channel (`ax_server::notify::email`) against the SMTP sink: what arrives, and that it
//! goes only over STARTTLS, to a certificate it trusts, within its timeout, with the password
//! in no error.

use std::time::{Duration, Instant};

use ax_server::notify::email::{send, EmailError, Mail};

use crate::common::smtp::{self, Options, SmtpSink};

const USER: &str = "alerts";
/// Needs percent-encoding in the URL, so the decoding is tried on the way too.
const PASSWORD: &str = "pw:7f@3a/x";
const PASSWORD_IN_URL: &str = "pw%3A7f%403a%2Fx";
const TIMEOUT: Duration = Duration::from_secs(10);

fn mail() -> Mail {
    Mail {
        subject: "ax: backup failed".into(),
        // The second line starts with a dot: stuffed on the wire, one dot again on arrival.
        text: "backup failed with 500\r\n.profile was missing\r\n".into(),
        html: "<p>backup <b>failed</b> with 500</p>".into(),
    }
}

fn to() -> Vec<String> {
    vec!["ops@example.com".into(), "dev@example.com".into()]
}

/// Sends `mail()` through `sink`, trusting its certificate.
async fn send_to(sink: &SmtpSink, url: &str, timeout: Duration) -> Result<(), EmailError> {
    let ca = sink.ca_file();
    send(
        url,
        Some("ax@example.com"),
        &to(),
        Some(&ca),
        timeout,
        &mail(),
    )
    .await
}

async fn sink_with_user() -> SmtpSink {
    smtp::start(Some((USER, PASSWORD))).await
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_mail_with_auth_over_starttls_arrives_whole() {
    let sink = sink_with_user().await;
    let url = sink.url(Some((USER, PASSWORD_IN_URL)));
    if let Err(e) = send_to(&sink, &url, TIMEOUT).await {
        panic!("not sent: {e}");
    }
    let received = sink.received();
    assert_eq!(received.len(), 1, "{received:?}");
    let got = &received[0];
    assert_eq!(got.from, "ax@example.com");
    assert_eq!(got.to, to());
    assert!(got.tls, "sent before STARTTLS");
    assert_eq!(got.user.as_deref(), Some(USER));
    for part in [
        "Subject: ax: backup failed",
        "From: ax@example.com",
        "To: ops@example.com, dev@example.com",
        "multipart/alternative",
        "text/plain",
        "backup failed with 500\r\n.profile was missing",
        "text/html",
        "<p>backup <b>failed</b> with 500</p>",
    ] {
        assert!(got.data.contains(part), "no {part:?} in:\n{}", got.data);
    }
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn from_defaults_to_ax_at_the_relay_host() {
    let sink = smtp::start(None).await;
    let ca = sink.ca_file();
    let sent = send(&sink.url(None), None, &to(), Some(&ca), TIMEOUT, &mail()).await;
    assert!(sent.is_ok(), "{sent:?}");
    let received = sink.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].from, "ax@127.0.0.1");
    assert_eq!(received[0].user, None);
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_relay_offering_only_auth_login_gets_the_mail() {
    let sink = smtp::start_with(Options {
        user: Some((USER.into(), PASSWORD.into())),
        mechanisms: "LOGIN",
        ..Options::default()
    })
    .await;
    let sent = send_to(&sink, &sink.url(Some((USER, PASSWORD_IN_URL))), TIMEOUT).await;
    assert!(sent.is_ok(), "{sent:?}");
    assert_eq!(sink.received()[0].user.as_deref(), Some(USER));
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_wrong_password_is_an_error_that_does_not_quote_it() {
    let sink = sink_with_user().await;
    let wrong = "wrong-pw-5c1e";
    let error = match send_to(&sink, &sink.url(Some((USER, wrong))), TIMEOUT).await {
        Ok(()) => panic!("sent with a wrong password"),
        Err(e) => e.to_string(),
    };
    assert!(error.contains("(535)"), "{error}");
    assert!(error.contains(&sink.addr.to_string()), "{error}");
    assert!(!error.contains(wrong), "the password is in: {error}");
    assert!(sink.received().is_empty());
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_relay_that_wants_auth_refuses_mail_without_it() {
    let sink = sink_with_user().await;
    let sent = send_to(&sink, &sink.url(None), TIMEOUT).await;
    assert!(
        matches!(&sent, Err(e @ EmailError::Send { .. }) if e.to_string().contains("530")),
        "{sent:?}"
    );
    assert!(sink.received().is_empty());
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_relay_without_starttls_gets_nothing() {
    // It would take the mail, unauthenticated and in plaintext: ax must not give it.
    let sink = smtp::start_with(Options {
        starttls: false,
        ..Options::default()
    })
    .await;
    let error = match send_to(&sink, &sink.url(None), TIMEOUT).await {
        Ok(()) => panic!("sent in plaintext"),
        Err(e) => e.to_string(),
    };
    assert!(error.contains("STARTTLS"), "{error}");
    assert!(sink.received().is_empty());
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn an_untrusted_certificate_is_refused() {
    // Without ca_file only the public roots are trusted, and the sink's certificate is its own.
    let sink = sink_with_user().await;
    let url = sink.url(Some((USER, PASSWORD_IN_URL)));
    let sent = send(&url, None, &to(), None, TIMEOUT, &mail()).await;
    let error = match sent {
        Ok(()) => panic!("sent to an untrusted certificate"),
        Err(e) => e.to_string(),
    };
    assert!(error.contains("certificate"), "{error}");
    assert!(
        !error.contains(PASSWORD) && !error.contains(PASSWORD_IN_URL),
        "{error}"
    );
    assert!(sink.received().is_empty());
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_relay_that_never_greets_fails_within_the_timeout() {
    let sink = smtp::start_with(Options {
        greet: false,
        ..Options::default()
    })
    .await;
    let timeout = Duration::from_millis(500);
    let started = Instant::now();
    let sent = send_to(&sink, &sink.url(None), timeout).await;
    let took = started.elapsed();
    assert!(matches!(sent, Err(EmailError::Send { .. })), "{sent:?}");
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_missing_ca_file_is_named() {
    let sink = smtp::start(None).await;
    let missing = "/nonexistent/ax-relay-ca.pem";
    let sent = send(
        &sink.url(None),
        None,
        &to(),
        Some(missing),
        TIMEOUT,
        &mail(),
    )
    .await;
    assert!(
        matches!(&sent, Err(EmailError::CaFile { path, .. }) if path == missing),
        "{sent:?}"
    );
}
