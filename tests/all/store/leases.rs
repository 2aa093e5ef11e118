//! `crates/ax-store/src/queries/leases.rs`: the leases that stand in for `GET_LOCK` on Galera,
//! on the shared MariaDB (a plain server: the statements are the same).

use std::time::Duration;

use ax_store::queries::leases;
use ax_store::{Conn, Db};

use crate::common::TestStore;

async fn hold(db: &Db, name: &str, holder: &str, ttl: Duration) -> bool {
    let Conn::Mysql(mut conn) = db.conn().await.expect("conn") else {
        panic!("a MariaDB store");
    };
    leases::hold(&mut conn, name, holder, ttl)
        .await
        .expect("hold")
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_lease_is_one_holders_until_it_expires_or_is_given_up() {
    let store = TestStore::mysql();
    let db = Db::connect(&store.url(), 2).await.expect("store");
    let long = Duration::from_secs(60);
    assert!(hold(&db, "id:a", "first", long).await, "free: taken");
    assert!(
        hold(&db, "id:a", "first", long).await,
        "its holder renews it"
    );
    assert!(!hold(&db, "id:a", "second", long).await, "held: refused");
    assert!(
        hold(&db, "id:b", "second", long).await,
        "another name is free"
    );

    // Given up, it is free at once.
    let Conn::Mysql(mut conn) = db.conn().await.expect("conn") else {
        panic!("a MariaDB store");
    };
    leases::give_up(&mut conn, "id:a", "second")
        .await
        .expect("not the holder's: nothing");
    assert!(
        !hold(&db, "id:a", "second", long).await,
        "still the first's"
    );
    leases::give_up(&mut conn, "id:a", "first")
        .await
        .expect("give up");
    assert!(hold(&db, "id:a", "second", long).await, "given up: taken");

    // Not renewed, it expires and another takes it; the first has lost it.
    let short = Duration::from_millis(300);
    assert!(hold(&db, "id:c", "first", short).await);
    assert!(!hold(&db, "id:c", "second", short).await);
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    assert!(hold(&db, "id:c", "second", long).await, "expired: taken");
    assert!(
        !hold(&db, "id:c", "first", short).await,
        "the first lost it"
    );
    assert!(
        !ax_store::queries::wsrep::is_galera(&mut conn)
            .await
            .expect("wsrep_on"),
        "the shared MariaDB is no Galera node"
    );
}
