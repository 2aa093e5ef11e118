//! An SMTP sink on 127.0.0.1 for the alert tests, written here on tokio and tokio-rustls so a
//! test sees exactly what ax put on the wire: STARTTLS with a self-signed certificate (its
//! PEM in a temp file, for ax's `ca_file`), AUTH PLAIN and LOGIN, MAIL, RCPT and DATA. It
//! keeps what it received and stops when dropped.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;

/// One message as the sink took it.
#[derive(Debug, Clone)]
pub struct Received {
    /// The MAIL FROM address, without its angle brackets.
    pub from: String,
    /// The RCPT TO addresses, in order.
    pub to: Vec<String>,
    /// The message as sent after DATA, dot-unstuffed, without the final `.` line.
    pub data: String,
    /// Whether the session had done STARTTLS before MAIL.
    pub tls: bool,
    /// The user that authenticated, if any.
    pub user: Option<String>,
}

/// How the sink behaves.
#[derive(Debug, Clone)]
pub struct Options {
    /// The user and password AUTH accepts; with one, MAIL before AUTH is refused (530).
    pub user: Option<(String, String)>,
    /// Offer STARTTLS (off: a relay that would take the mail in plaintext).
    pub starttls: bool,
    /// The AUTH mechanisms offered after STARTTLS.
    pub mechanisms: &'static str,
    /// Greet (off: accept connections and never say a word).
    pub greet: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            user: None,
            starttls: true,
            mechanisms: "PLAIN LOGIN",
            greet: true,
        }
    }
}

/// A running sink.
pub struct SmtpSink {
    pub addr: SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
    ca_file: tempfile::NamedTempFile,
    server: JoinHandle<()>,
}

impl SmtpSink {
    /// `smtp://user:password@127.0.0.1:port`, or without userinfo.
    pub fn url(&self, user: Option<(&str, &str)>) -> String {
        match user {
            Some((user, password)) => format!("smtp://{user}:{password}@{}", self.addr),
            None => format!("smtp://{}", self.addr),
        }
    }

    /// The PEM file of the sink's certificate, to trust as the relay's CA.
    pub fn ca_file(&self) -> String {
        self.ca_file.path().display().to_string()
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().expect("sink lock").clone()
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        // The sessions live in the accept loop's JoinSet, so they end with it.
        self.server.abort();
    }
}

/// A sink that offers STARTTLS and, with `user`, requires AUTH as that user.
pub async fn start(user: Option<(&str, &str)>) -> SmtpSink {
    start_with(Options {
        user: user.map(|(u, p)| (u.to_string(), p.to_string())),
        ..Options::default()
    })
    .await
}

pub async fn start_with(options: Options) -> SmtpSink {
    let key = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("self-signed certificate");
    let mut ca_file = tempfile::NamedTempFile::new().expect("temp file");
    std::io::Write::write_all(&mut ca_file, key.cert.pem().as_bytes()).expect("write CA file");
    let acceptor = acceptor(
        key.cert.der().clone(),
        PrivatePkcs8KeyDer::from(key.signing_key.serialize_der()).into(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind sink");
    let addr = listener.local_addr().expect("sink address");
    let received = Arc::new(Mutex::new(Vec::new()));
    let session = Arc::new(Session {
        options,
        acceptor,
        received: received.clone(),
    });
    let server = tokio::spawn(accept_loop(listener, session));
    SmtpSink {
        addr,
        received,
        ca_file,
        server,
    }
}

fn acceptor(cert: CertificateDer<'static>, key: PrivateKeyDer<'static>) -> TlsAcceptor {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .expect("sink certificate");
    TlsAcceptor::from(Arc::new(config))
}

async fn accept_loop(listener: TcpListener, session: Arc<Session>) {
    let mut sessions = JoinSet::new();
    while let Ok((tcp, _)) = listener.accept().await {
        let session = session.clone();
        sessions.spawn(async move {
            // A client that hangs up mid-dialogue is the client's business, not the sink's.
            let _ = session.serve(tcp).await;
        });
    }
}

/// What every connection shares.
struct Session {
    options: Options,
    acceptor: TlsAcceptor,
    received: Arc<Mutex<Vec<Received>>>,
}

/// How a stretch of dialogue ended.
enum Next {
    StartTls,
    Quit,
}

/// The per-connection state of the dialogue.
#[derive(Default)]
struct State {
    tls: bool,
    user: Option<String>,
    from: Option<String>,
    to: Vec<String>,
}

impl Session {
    async fn serve(&self, tcp: TcpStream) -> std::io::Result<()> {
        if !self.options.greet {
            // Hold the connection open, silent, until the client or the sink gives up.
            let mut tcp = tcp;
            let _ = tokio::io::AsyncReadExt::read(&mut tcp, &mut [0u8; 1]).await;
            return Ok(());
        }
        let mut plain = BufReader::new(tcp);
        plain.write_all(b"220 localhost ESMTP sink\r\n").await?;
        let mut state = State::default();
        if let Next::StartTls = self.dialogue(&mut plain, &mut state).await? {
            let tls = self.acceptor.accept(plain.into_inner()).await?;
            // RFC 3207: after STARTTLS the client starts over with EHLO; nothing carries.
            let mut state = State {
                tls: true,
                ..State::default()
            };
            self.dialogue(&mut BufReader::new(tls), &mut state).await?;
        }
        Ok(())
    }

    async fn dialogue<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        io: &mut BufReader<S>,
        state: &mut State,
    ) -> std::io::Result<Next> {
        loop {
            let line = read_line(io).await?;
            let (verb, rest) = line.split_once(' ').unwrap_or((line.as_str(), ""));
            let reply = match verb.to_ascii_uppercase().as_str() {
                "EHLO" => self.ehlo(state),
                "HELO" => "250 localhost\r\n".into(),
                "STARTTLS" if self.options.starttls && !state.tls => {
                    io.write_all(b"220 2.0.0 ready for TLS\r\n").await?;
                    return Ok(Next::StartTls);
                }
                "AUTH" => self.auth(io, state, rest).await?,
                "MAIL" => self.mail(state, rest),
                "RCPT" => match (&state.from, address(rest, "TO:")) {
                    (None, _) => "503 5.5.1 MAIL first\r\n".into(),
                    (Some(_), Some(to)) => {
                        state.to.push(to);
                        "250 2.1.5 ok\r\n".into()
                    }
                    (Some(_), None) => "501 5.5.4 RCPT TO:<address>\r\n".into(),
                },
                "DATA" if state.to.is_empty() => "503 5.5.1 RCPT first\r\n".into(),
                "DATA" => self.data(io, state).await?,
                "RSET" => {
                    state.from = None;
                    state.to.clear();
                    "250 2.0.0 ok\r\n".into()
                }
                "NOOP" => "250 2.0.0 ok\r\n".into(),
                "QUIT" => {
                    io.write_all(b"221 2.0.0 bye\r\n").await?;
                    return Ok(Next::Quit);
                }
                _ => "502 5.5.2 not implemented\r\n".into(),
            };
            io.write_all(reply.as_bytes()).await?;
        }
    }

    fn ehlo(&self, state: &State) -> String {
        let mut lines = vec!["localhost".to_string()];
        if self.options.starttls && !state.tls {
            lines.push("STARTTLS".into());
        }
        if state.tls && self.options.user.is_some() {
            lines.push(format!("AUTH {}", self.options.mechanisms));
        }
        let last = lines.len() - 1;
        lines
            .iter()
            .enumerate()
            .map(|(n, line)| format!("250{}{line}\r\n", if n == last { ' ' } else { '-' }))
            .collect()
    }

    async fn auth<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        io: &mut BufReader<S>,
        state: &mut State,
        rest: &str,
    ) -> std::io::Result<String> {
        if !state.tls {
            return Ok("538 5.7.11 encryption required for AUTH\r\n".into());
        }
        let (mechanism, initial) = rest.split_once(' ').unwrap_or((rest, ""));
        let mechanism = mechanism.to_ascii_uppercase();
        if !self.options.mechanisms.split(' ').any(|m| m == mechanism) {
            return Ok("504 5.5.4 mechanism not offered\r\n".into());
        }
        let (user, password) = match mechanism.as_str() {
            "PLAIN" => {
                let response = match initial {
                    "" => challenge(io, "").await?,
                    given => given.to_string(),
                };
                // authzid NUL authcid NUL password
                let plain = decode64(&response);
                let mut parts = plain.split('\0').skip(1);
                let user = parts.next().unwrap_or_default().to_string();
                (user, parts.next().unwrap_or_default().to_string())
            }
            _ => {
                let user = match initial {
                    "" => challenge(io, "VXNlcm5hbWU6").await?,
                    given => given.to_string(),
                };
                let password = challenge(io, "UGFzc3dvcmQ6").await?;
                (decode64(&user), decode64(&password))
            }
        };
        Ok(match &self.options.user {
            Some((u, p)) if *u == user && *p == password => {
                state.user = Some(user);
                "235 2.7.0 authenticated\r\n".into()
            }
            _ => "535 5.7.8 authentication credentials invalid\r\n".into(),
        })
    }

    fn mail(&self, state: &mut State, rest: &str) -> String {
        if self.options.user.is_some() && state.user.is_none() {
            return "530 5.7.0 authentication required\r\n".into();
        }
        match address(rest, "FROM:") {
            Some(from) => {
                state.from = Some(from);
                state.to.clear();
                "250 2.1.0 ok\r\n".into()
            }
            None => "501 5.5.4 MAIL FROM:<address>\r\n".into(),
        }
    }

    async fn data<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        io: &mut BufReader<S>,
        state: &mut State,
    ) -> std::io::Result<String> {
        io.write_all(b"354 end with <CRLF>.<CRLF>\r\n").await?;
        let mut data = String::new();
        loop {
            let mut line = String::new();
            if io.read_line(&mut line).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            if line == ".\r\n" {
                break;
            }
            // RFC 5321 4.5.2: a line the client began with a dot had one added.
            data.push_str(line.strip_prefix('.').unwrap_or(&line));
        }
        self.received.lock().expect("sink lock").push(Received {
            from: state.from.take().unwrap_or_default(),
            to: std::mem::take(&mut state.to),
            data,
            tls: state.tls,
            user: state.user.clone(),
        });
        Ok("250 2.0.0 queued\r\n".into())
    }
}

/// One command line without its CRLF; end of stream is an error (the dialogue is over).
async fn read_line<S: AsyncRead + Unpin>(io: &mut BufReader<S>) -> std::io::Result<String> {
    let mut line = String::new();
    if io.read_line(&mut line).await? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

/// Sends a 334 challenge and reads the client's answer.
async fn challenge<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut BufReader<S>,
    prompt: &str,
) -> std::io::Result<String> {
    io.write_all(format!("334 {prompt}\r\n").as_bytes()).await?;
    read_line(io).await
}

fn decode64(text: &str) -> String {
    let bytes = BASE64.decode(text.trim()).unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `<a@b.c>` out of `FROM:<a@b.c> BODY=8BITMIME` (the prefix is `FROM:` or `TO:`).
fn address(rest: &str, prefix: &str) -> Option<String> {
    if !rest.get(..prefix.len())?.eq_ignore_ascii_case(prefix) {
        return None;
    }
    let (address, _) = rest[prefix.len()..]
        .trim_start()
        .strip_prefix('<')?
        .split_once('>')?;
    Some(address.to_string())
}
