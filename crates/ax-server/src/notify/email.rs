//! Alert mail: one message (plain text and HTML as multipart/alternative) handed to an SMTP
//! relay over STARTTLS only — a relay that does not offer it gets nothing, never plaintext.
//! The relay URL holds a password, so no error built here quotes the URL or the server's
//! reply text (a reply may echo what it was sent): only the host, the port and what kind of
//! failure it was.

use std::borrow::Cow;
use std::time::Duration;

use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, CertificateStore, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use percent_encoding::percent_decode_str;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

/// The message submission port (RFC 6409), where relays offer STARTTLS.
const DEFAULT_PORT: u16 = 587;

/// One mail: a subject, and the same content as plain text and as HTML.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mail {
    pub subject: String,
    pub text: String,
    pub html: String,
}

/// Why a mail was not sent. No variant holds the password or the URL it came in.
#[derive(Debug, thiserror::Error)]
pub enum EmailError {
    /// The `smtp` URL cannot be used.
    #[error("smtp: {0}")]
    Url(String),
    /// An address cannot be used; `field` is `from` or `to`.
    #[error("{field}: {reason}")]
    Address { field: &'static str, reason: String },
    /// The CA file given for the relay cannot be used.
    #[error("ca_file {path}: {reason}")]
    CaFile { path: String, reason: String },
    /// The relay was reached (or tried) and the mail was not accepted.
    #[error("mail through {server}: {reason}")]
    Send { server: String, reason: String },
}

/// The relay as the `smtp` URL names it. No `Debug`: it holds the password.
struct Relay {
    host: String,
    port: u16,
    /// User and password, percent-decoded; none means no AUTH.
    credentials: Option<(String, String)>,
}

impl Relay {
    /// `host:port` for messages (`[::1]:587` for an IPv6 literal).
    fn server(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    fn failed(&self, reason: String) -> EmailError {
        EmailError::Send {
            server: self.server(),
            reason,
        }
    }
}

/// Sends `mail` from `from` (default `ax@<relay host>`) to every address of `to` through the
/// relay `smtp` (`smtp://user:password@host:port`, port 587 by default, no userinfo for no
/// AUTH), trusting the public web roots or, with `ca_file`, only the PEM certificates in it.
/// `timeout` bounds the whole exchange, connect to the end of DATA.
pub async fn send(
    smtp: &str,
    from: Option<&str>,
    to: &[String],
    ca_file: Option<&str>,
    timeout: Duration,
    mail: &Mail,
) -> Result<(), EmailError> {
    let relay = parse_relay(smtp)?;
    let message = message(&relay, from, to, mail)?;
    let transport = transport(&relay, ca_file, timeout)?;
    // lettre's own timeout covers only the connect on tokio: a relay that accepts and then
    // goes silent would hold the send for ever without this one.
    match tokio::time::timeout(timeout, transport.send(message)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(relay.failed(describe(&error))),
        Err(_) => Err(relay.failed(format!("no answer within {timeout:?}"))),
    }
}

/// Reads `smtp://[user:password@]host[:port]`.
fn parse_relay(smtp: &str) -> Result<Relay, EmailError> {
    let bad = |reason: &str| EmailError::Url(reason.to_string());
    // url's parse errors name the rule broken, never the input, so they are safe to show.
    let url = url::Url::parse(smtp).map_err(|e| EmailError::Url(e.to_string()))?;
    if url.scheme() != "smtp" {
        return Err(bad("must be smtp://user:password@host:port (STARTTLS)"));
    }
    if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
        return Err(bad("takes a user, password, host and port only"));
    }
    let host = match url.host() {
        Some(url::Host::Domain(name)) if !name.is_empty() => name.to_string(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        _ => return Err(bad("has no host")),
    };
    let credentials = match (url.username(), url.password()) {
        ("", None) => None,
        (user, Some(password)) if !user.is_empty() => {
            Some((decode(user, "user")?, decode(password, "password")?))
        }
        _ => return Err(bad("needs both a user and a password, or neither")),
    };
    Ok(Relay {
        host,
        port: url.port().unwrap_or(DEFAULT_PORT),
        credentials,
    })
}

fn decode(part: &str, what: &str) -> Result<String, EmailError> {
    percent_decode_str(part)
        .decode_utf8()
        .map(Cow::into_owned)
        .map_err(|_| EmailError::Url(format!("the {what} is not UTF-8 once percent-decoded")))
}

/// The message, multipart/alternative so a mail client shows the HTML and a terminal the text.
fn message(
    relay: &Relay,
    from: Option<&str>,
    to: &[String],
    mail: &Mail,
) -> Result<Message, EmailError> {
    let sender = match from {
        Some(from) => mailbox("from", from)?,
        None => mailbox("from", &format!("ax@{}", relay.host))?,
    };
    if to.is_empty() {
        return Err(EmailError::Address {
            field: "to",
            reason: "no address to send to".into(),
        });
    }
    let mut builder = Message::builder()
        .from(sender)
        .subject(mail.subject.as_str());
    for address in to {
        builder = builder.to(mailbox("to", address)?);
    }
    let body = MultiPart::alternative_plain_html(mail.text.clone(), mail.html.clone());
    // With a sender and at least one recipient set, building can only fail on headers.
    builder.multipart(body).map_err(|e| EmailError::Address {
        field: "to",
        reason: e.to_string(),
    })
}

fn mailbox(field: &'static str, address: &str) -> Result<Mailbox, EmailError> {
    address.parse().map_err(|_| EmailError::Address {
        field,
        reason: format!("`{address}` is not a mail address"),
    })
}

/// A transport that refuses to go on without STARTTLS and authenticates only after it.
fn transport(
    relay: &Relay,
    ca_file: Option<&str>,
    timeout: Duration,
) -> Result<AsyncSmtpTransport<Tokio1Executor>, EmailError> {
    // "dangerous" only in that lettre leaves the TLS mode to us; Required is the strict one.
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(relay.host.as_str())
        .port(relay.port)
        .tls(Tls::Required(tls(relay, ca_file)?))
        .timeout(Some(timeout));
    if let Some((user, password)) = &relay.credentials {
        builder = builder.credentials(Credentials::new(user.clone(), password.clone()));
    }
    Ok(builder.build())
}

fn tls(relay: &Relay, ca_file: Option<&str>) -> Result<TlsParameters, EmailError> {
    let builder = TlsParameters::builder(relay.host.clone());
    let builder = match ca_file {
        None => builder.certificate_store(CertificateStore::WebpkiRoots),
        Some(path) => read_ca(path)?.into_iter().fold(
            builder.certificate_store(CertificateStore::None),
            |b, ca| b.add_root_certificate(ca),
        ),
    };
    builder.build_rustls().map_err(|e| match ca_file {
        // Adding a root is the only step that can fail here: the file's certificate is bad.
        Some(path) => EmailError::CaFile {
            path: path.to_string(),
            reason: "not a usable CA certificate".into(),
        },
        None => relay.failed(describe(&e)),
    })
}

/// The certificates of a PEM file. Read on every send, in line (a local file of a few KB), so
/// a renewed private CA needs no restart.
fn read_ca(path: &str) -> Result<Vec<Certificate>, EmailError> {
    let refuse = |reason: String| EmailError::CaFile {
        path: path.to_string(),
        reason,
    };
    let pem = std::fs::read(path).map_err(|e| refuse(e.to_string()))?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| refuse(format!("not PEM: {e}")))?;
    if certificates.is_empty() {
        return Err(refuse("holds no PEM certificate".into()));
    }
    certificates
        .into_iter()
        .map(|der| {
            Certificate::from_der(der.to_vec()).map_err(|_| refuse("bad certificate".into()))
        })
        .collect()
}

/// What went wrong, from lettre's error kind: a refusal by its reply code alone, and an
/// unreadable reply without its text, since the server's words may echo what it was sent.
/// Other kinds are told by their innermost cause (lettre's own words, or the I/O or TLS
/// error), which carries no server text; lettre's outer layers only repeat the kind.
fn describe(error: &lettre::transport::smtp::Error) -> String {
    if error.is_timeout() {
        return "timed out".into();
    }
    if let Some(code) = error.status() {
        return format!("refused by the server ({code})");
    }
    if error.is_response() {
        return "the server's reply could not be read".into();
    }
    let mut cause: &dyn std::error::Error = error;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relay(url: &str) -> Relay {
        match parse_relay(url) {
            Ok(relay) => relay,
            Err(e) => panic!("{url}: {e}"),
        }
    }

    fn refusal(url: &str) -> String {
        match parse_relay(url) {
            Ok(_) => panic!("{url} was accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn userinfo_host_and_port() {
        let r = relay("smtp://alerts:hunter2@mail.example.com:2525");
        assert_eq!((r.host.as_str(), r.port), ("mail.example.com", 2525));
        assert_eq!(r.credentials, Some(("alerts".into(), "hunter2".into())));
        assert_eq!(r.server(), "mail.example.com:2525");
    }

    #[test]
    fn the_port_defaults_to_submission() {
        assert_eq!(relay("smtp://mail.example.com").port, 587);
        assert_eq!(relay("smtp://u:p@mail.example.com/").port, 587);
    }

    #[test]
    fn no_userinfo_means_no_auth() {
        assert_eq!(relay("smtp://10.0.0.5:25").credentials, None);
        assert_eq!(relay("smtp://[::1]:25").server(), "[::1]:25");
    }

    #[test]
    fn user_and_password_are_percent_decoded() {
        let r = relay("smtp://ops%40example.com:p%40ss%3Aw%2Fo%25rd@mail:587");
        assert_eq!(
            r.credentials,
            Some(("ops@example.com".into(), "p@ss:w/o%rd".into()))
        );
    }

    #[test]
    fn bad_urls_are_refused_naming_smtp() {
        for url in [
            "smtps://u:p@mail:465",
            "http://mail:587",
            "mail.example.com:587",
            "smtp://",
            "smtp://u@mail:587",
            "smtp://:p@mail:587",
            "smtp://mail:587?tls=none",
            "smtp://mail:99999",
        ] {
            assert!(
                refusal(url).starts_with("smtp: "),
                "{url}: {}",
                refusal(url)
            );
        }
    }

    #[test]
    fn a_refusal_never_quotes_the_password() {
        for url in [
            "smtp://u:s3cretpw@mail:99999",
            "smtps://u:s3cretpw@mail",
            "smtp://u:s3cretpw@mail/path",
            "smtp://u:s3cret%FFpw@mail",
        ] {
            assert!(!refusal(url).contains("s3cret"), "{url}: {}", refusal(url));
        }
    }

    #[test]
    fn from_defaults_to_ax_at_the_relay_host() {
        let mail = Mail {
            subject: "s".into(),
            text: "t".into(),
            html: "<p>h</p>".into(),
        };
        let to = ["ops@example.com".to_string()];
        let built = message(&relay("smtp://mail.example.com"), None, &to, &mail)
            .map(|m| String::from_utf8_lossy(&m.formatted()).into_owned());
        assert!(matches!(&built, Ok(text) if text.contains("From: ax@mail.example.com")));
    }

    #[test]
    fn bad_addresses_name_their_field() {
        let mail = Mail {
            subject: "s".into(),
            text: "t".into(),
            html: "h".into(),
        };
        let r = relay("smtp://mail");
        let to = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let field = |result: Result<Message, EmailError>| match result {
            Err(EmailError::Address { field, .. }) => field,
            other => panic!("{:?}", other.map(|_| ())),
        };
        assert_eq!(
            field(message(&r, Some("not mail"), &to(&["a@b.c"]), &mail)),
            "from"
        );
        assert_eq!(
            field(message(&r, None, &to(&["a@b.c", "nope"]), &mail)),
            "to"
        );
        assert_eq!(field(message(&r, None, &[], &mail)), "to");
    }
}
