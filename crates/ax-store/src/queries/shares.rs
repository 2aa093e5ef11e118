//! Shares of the tasks between processes (see `ax_core::cluster::shares`) as the database sees
//! them: a task's partition is its id modulo their number, so a share is a list of remainders
//! a query can take, and the enabled tasks can be counted per partition.

use diesel::dsl::AsExprOf;
use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_async::RunQueryDsl;

use ax_core::cluster::shares::{Share, PARTITIONS};

use crate::rows::schema::ax_task::dsl as t;
use crate::with_conn;
use crate::{Conn, StoreError};

diesel::infix_operator!(Modulo, " % ", BigInt);

/// A task's partition, as SQL: its id modulo the partitions.
pub(crate) fn partition() -> Modulo<t::id, AsExprOf<i64, BigInt>> {
    Modulo::new(t::id, (PARTITIONS as i64).into_sql::<BigInt>())
}

/// The partitions of `share` to filter on; `None` for every partition (no filter at all).
pub(crate) fn filter_of(share: Share) -> Option<Vec<i64>> {
    (!share.is_all()).then(|| share.partitions().map(|p| p as i64).collect())
}

#[derive(QueryableByName)]
struct PartitionCount {
    #[diesel(sql_type = BigInt)]
    remainder: i64,
    #[diesel(sql_type = BigInt)]
    tasks: i64,
}

/// How many enabled tasks each partition holds, by partition.
pub async fn enabled_per_partition(conn: &mut Conn) -> Result<Vec<u64>, StoreError> {
    // Raw SQL: diesel checks a grouped select by columns, and the group here is an expression.
    let sql = format!(
        "SELECT id % {PARTITIONS} AS remainder, COUNT(*) AS tasks FROM ax_task \
         WHERE status = 'ENABLED' GROUP BY id % {PARTITIONS}"
    );
    let rows: Vec<PartitionCount> = with_conn!(conn, |c| diesel::sql_query(&sql).load(c).await)?;
    let mut counts = vec![0; PARTITIONS];
    for row in rows {
        if let Some(slot) = usize::try_from(row.remainder)
            .ok()
            .and_then(|p| counts.get_mut(p))
        {
            *slot = row.tasks as u64;
        }
    }
    Ok(counts)
}
