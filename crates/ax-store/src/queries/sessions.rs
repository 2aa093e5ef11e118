//! Console sessions: opened at sign-in, looked up on each console request, ended at sign-out
//! or when they expire.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::rows::schema::ax_session::dsl as s;
use crate::with_conn;
use crate::{to_db, Conn, StoreError};

/// Opens session `key` (the digest of its secret) for the token named `token_name` whose
/// digest is `token_digest`, and drops the sessions that expired before `now`.
pub async fn open(
    conn: &mut Conn,
    key: &str,
    (token_name, token_digest): (&str, &str),
    now: DateTime<Utc>,
    expires_at: DateTime<Utc>,
) -> Result<(), StoreError> {
    let now = to_db(now);
    with_conn!(conn, |c| diesel::delete(
        s::ax_session.filter(s::expires_at.lt(now))
    )
    .execute(c)
    .await)?;
    with_conn!(conn, |c| diesel::insert_into(s::ax_session)
        .values((
            s::id.eq(key),
            s::token_name.eq(token_name),
            s::token_digest.eq(token_digest),
            s::created_at.eq(now),
            s::expires_at.eq(to_db(expires_at)),
        ))
        .execute(c)
        .await)?;
    Ok(())
}

/// The token name and token digest of session `key`, if it is open at `now`.
pub async fn token_of(
    conn: &mut Conn,
    key: &str,
    now: DateTime<Utc>,
) -> Result<Option<(String, String)>, StoreError> {
    let now = to_db(now);
    Ok(with_conn!(conn, |c| s::ax_session
        .filter(s::id.eq(key))
        .filter(s::expires_at.gt(now))
        .select((s::token_name, s::token_digest))
        .first(c)
        .await
        .optional())?)
}

/// Ends session `key`.
pub async fn close(conn: &mut Conn, key: &str) -> Result<(), StoreError> {
    with_conn!(conn, |c| diesel::delete(
        s::ax_session.filter(s::id.eq(key))
    )
    .execute(c)
    .await)?;
    Ok(())
}
