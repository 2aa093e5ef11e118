//! What a MySQL/MariaDB server says of Galera (its `wsrep_*` variables): whether it is a node
//! of a Galera cluster, and whether it takes queries now. A node cut off from its cluster's
//! majority (non-primary) or still joining keeps its connections and answers `SELECT 1`, `SET`
//! and `SHOW`, but refuses every statement on a table with error 1047: a connection to it is as
//! good as broken, and one to another node is wanted.

use diesel::query_builder::SqlQuery;
use diesel::sql_types::Text;
use diesel::QueryableByName;
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};

use crate::StoreError;

/// Whether the server is a Galera node: reads [`Setting`] rows (none on a server without
/// Galera's variables, as Oracle's MySQL).
pub fn wsrep_on() -> SqlQuery {
    diesel::sql_query("SHOW VARIABLES LIKE 'wsrep_on'")
}

/// Whether a Galera node takes queries: reads [`Setting`] rows.
fn wsrep_ready() -> SqlQuery {
    diesel::sql_query("SHOW STATUS LIKE 'wsrep_ready'")
}

/// A row of `SHOW VARIABLES` or `SHOW STATUS`.
#[derive(QueryableByName)]
pub struct Setting {
    #[diesel(sql_type = Text, column_name = "Value")]
    pub value: String,
}

/// Whether any row says `ON`.
pub fn on(settings: &[Setting]) -> bool {
    settings.iter().any(|s| s.value.eq_ignore_ascii_case("ON"))
}

/// Whether the server at the other end of `conn` is a Galera node.
pub async fn is_galera(conn: &mut AsyncMysqlConnection) -> Result<bool, StoreError> {
    let settings: Vec<Setting> = wsrep_on().load(conn).await?;
    Ok(on(&settings))
}

/// Why the server at the other end of `conn` cannot serve ax now, if it cannot: a Galera node
/// not ready. Any other server is.
pub async fn unready(conn: &mut AsyncMysqlConnection) -> Result<Option<String>, StoreError> {
    if !is_galera(conn).await? {
        return Ok(None);
    }
    let ready: Vec<Setting> = wsrep_ready().load(conn).await?;
    Ok((!on(&ready)).then(|| {
        "a Galera node not ready for queries (wsrep_ready OFF: not in the cluster's primary \
         component, or still joining)"
            .to_string()
    }))
}
