//! Outages of the servers ax depends on, made with in-test TCP proxies in front of the shared
//! MariaDB and Redis (which keep running for everyone else). First: ax's MySQL connections go
//! where the URL says, which is what lets a proxy stand in for the server at all.

mod common;

use ax::store::{Conn, Db};
use common::{host_port, Proxy, TestStore, MYSQL_SERVER};
use diesel_async::RunQueryDsl;

#[derive(diesel::QueryableByName)]
struct Session {
    #[diesel(sql_type = diesel::sql_types::Text)]
    host: String,
}

#[actix_rt::test]
async fn mysql_connects_to_the_host_and_port_of_its_url() {
    let proxy = Proxy::start(&host_port(MYSQL_SERVER)).await;
    let store = TestStore::mysql();
    let db = Db::connect(&store.url_through(&proxy), 2)
        .await
        .unwrap_or_else(|err| panic!("connect through the proxy: {err}"));
    let mut conn = db.conn().await.expect("a pooled connection");
    let Conn::Mysql(mysql) = &mut conn else {
        panic!("a mysql:// URL gave a {} pool", db.backend());
    };
    // The server names a TCP client `address:port` and a socket client `localhost`.
    let session: Session = diesel::sql_query(
        "SELECT host FROM information_schema.processlist WHERE id = CONNECTION_ID()",
    )
    .get_result(&mut **mysql)
    .await
    .expect("query through the proxy");
    let port: u16 = session
        .host
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or_else(|| panic!("not a TCP session: host `{}`", session.host));
    assert!(
        proxy.upstream_ports().contains(&port),
        "the session ({}) did not come through the proxy (its connections: {:?})",
        session.host,
        proxy.upstream_ports()
    );
    // Migrations and the pool each connected through it.
    assert!(proxy.forwarded() >= 2, "forwarded {}", proxy.forwarded());
}
