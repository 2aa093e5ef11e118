//! Settings ax keeps in its own database.

use diesel::prelude::*;
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use diesel_async::RunQueryDsl;

use crate::store::schema::ax_meta::dsl as m;
use crate::store::{Conn, StoreError};
use crate::with_conn;

const SIGNING_SECRET: &str = "signing_secret";

/// The signing secret every ax process on this database shares: the stored one, or
/// `generated` stored now (if two processes race, the first insert wins and both read it).
pub async fn signing_secret(conn: &mut Conn, generated: String) -> Result<String, StoreError> {
    if let Some(secret) = read(conn, SIGNING_SECRET).await? {
        return Ok(secret);
    }
    let inserted = with_conn!(conn, |c| diesel::insert_into(m::ax_meta)
        .values((m::name.eq(SIGNING_SECRET), m::value.eq(&generated)))
        .execute(c)
        .await);
    match inserted {
        Ok(_) => Ok(generated),
        Err(DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _)) => {
            read(conn, SIGNING_SECRET)
                .await?
                .ok_or(StoreError::Query(DieselError::NotFound))
        }
        Err(err) => Err(err.into()),
    }
}

async fn read(conn: &mut Conn, name: &str) -> Result<Option<String>, StoreError> {
    Ok(with_conn!(conn, |c| m::ax_meta
        .filter(m::name.eq(name))
        .select(m::value)
        .first(c)
        .await
        .optional())?)
}
