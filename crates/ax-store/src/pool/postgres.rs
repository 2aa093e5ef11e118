//! Opening a PostgreSQL connection, in plain text or over TLS (rustls: the web PKI's
//! authorities and those of `sslrootcert`), as the URL's `sslmode` says.

use std::sync::Arc;

use diesel::ConnectionError;
use diesel_async::AsyncPgConnection;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use tokio_postgres::config::SslMode as DriverSslMode;
use tokio_postgres::NoTls;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::backend::{PostgresUrl, SslMode};

/// A connection to the server of `url`. `require`: over TLS, the server's certificate
/// checked; `prefer`: so if that works, else in plain text (a local server's self-signed
/// certificate); `disable`: in plain text.
pub async fn establish(url: PostgresUrl) -> Result<AsyncPgConnection, ConnectionError> {
    let mut config: tokio_postgres::Config = url.url().parse().map_err(bad)?;
    if url.ssl != SslMode::Disable {
        config.ssl_mode(DriverSslMode::Require);
        match connect_tls(&config, &url).await {
            Ok(conn) => return Ok(conn),
            Err(err) if url.ssl == SslMode::Require => return Err(err),
            Err(_) => {}
        }
    }
    config.ssl_mode(DriverSslMode::Disable);
    let (client, connection) = config.connect(NoTls).await.map_err(bad)?;
    AsyncPgConnection::try_from_client_and_connection(client, connection).await
}

async fn connect_tls(
    config: &tokio_postgres::Config,
    url: &PostgresUrl,
) -> Result<AsyncPgConnection, ConnectionError> {
    let (client, connection) = config.connect(tls(url)?).await.map_err(bad)?;
    AsyncPgConnection::try_from_client_and_connection(client, connection).await
}

/// The TLS set-up: the web PKI's authorities, and those of the URL's `sslrootcert` file.
fn tls(url: &PostgresUrl) -> Result<MakeRustlsConnect, ConnectionError> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if let Some(path) = &url.root_cert {
        let certs = CertificateDer::pem_file_iter(path)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|err| ConnectionError::BadConnection(format!("sslrootcert {path}: {err}")))?;
        roots.add_parsable_certificates(certs);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| ConnectionError::BadConnection(err.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

fn bad(err: tokio_postgres::Error) -> ConnectionError {
    ConnectionError::BadConnection(err.to_string())
}
