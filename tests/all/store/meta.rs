//! `crates/ax-store/src/queries/meta.rs`: the signing secret.

use ax_store::Db;

use crate::store::support::{conn, on_every_backend};

on_every_backend!(signing_secret_is_shared);

async fn signing_secret_is_shared(db: &Db) {
    use ax_store::queries::meta;
    let first = meta::signing_secret(&mut conn(db).await, "first-secret".into())
        .await
        .expect("signing_secret");
    assert_eq!(first, "first-secret", "the first call stores its value");
    let second = meta::signing_secret(&mut conn(db).await, "second-secret".into())
        .await
        .expect("signing_secret");
    assert_eq!(second, "first-secret", "later calls read the stored one");
    // Every caller gets the same one.
    let third = meta::signing_secret(&mut conn(db).await, "third-secret".into())
        .await
        .expect("signing_secret");
    assert_eq!(third, "first-secret");
}
