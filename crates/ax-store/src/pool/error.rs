//! Errors of the storage layer, and what a caller may do about each.

/// What a Galera node says when it is out of its cluster's primary component (cut off from
/// the majority, or still joining): error 1047 for a new statement, and this provider status
/// for a commit it could not replicate. The node keeps its connections, but none of them can
/// write until it is back.
pub const GALERA_NODE_OUT: &[&str] = &[
    "WSREP has not yet prepared node for application use",
    "Not connected to Primary Component",
];

/// Errors of the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unsupported store URL {0}")]
    BadUrl(String),
    #[error("cannot connect to the store: {0}")]
    Connect(String),
    #[error("migration failed: {0}")]
    Migration(String),
    #[error("no database connection available: {0}")]
    Pool(String),
    #[error("database error: {0}")]
    Query(#[from] diesel::result::Error),
    #[error("the write was not committed: {0}")]
    Commit(String),
    #[error("no turn to write within {0:?}: another write held the database")]
    WriteTurn(std::time::Duration),
}

impl StoreError {
    /// The database could not be reached (no connection, or it broke, or a Galera node cannot
    /// serve: see [`GALERA_NODE_OUT`]), as opposed to a statement it refused: the same write
    /// may pass once it is back.
    pub fn is_unreachable(&self) -> bool {
        use diesel::result::{DatabaseErrorKind, Error};
        match self {
            StoreError::Pool(_) | StoreError::Connect(_) => true,
            StoreError::Query(Error::DatabaseError(kind, info)) => {
                matches!(
                    kind,
                    DatabaseErrorKind::ClosedConnection | DatabaseErrorKind::UnableToSendCommand
                ) || GALERA_NODE_OUT.iter().any(|m| info.message().contains(m))
            }
            _ => false,
        }
    }

    /// The write would give a row the key of another.
    pub fn is_unique_violation(&self) -> bool {
        use diesel::result::{DatabaseErrorKind, Error};
        matches!(
            self,
            StoreError::Query(Error::DatabaseError(DatabaseErrorKind::UniqueViolation, _))
        )
    }

    /// The write would give a scene two tasks of one name (`uq_ax_task_scene_name`).
    pub fn is_name_taken(&self) -> bool {
        use diesel::result::{DatabaseErrorKind, Error};
        match self {
            StoreError::Query(Error::DatabaseError(DatabaseErrorKind::UniqueViolation, info)) => {
                let message = info.message();
                // MySQL names the index, SQLite the columns.
                message.contains("uq_ax_task_scene_name") || message.contains("ax_task.scene")
            }
            _ => false,
        }
    }

    /// A failure that rolled the transaction back and may pass on a second try: a deadlock
    /// or lock wait timeout (MySQL: "try restarting transaction"), which is also how a Galera
    /// node reports a certification conflict (another node committed a write to the same rows
    /// first), a Galera node that cannot serve ([`GALERA_NODE_OUT`]: the next try takes a
    /// connection the pool has checked, to another node if need be), or a busy SQLite file.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::WriteTurn(_) => true,
            StoreError::Query(diesel::result::Error::DatabaseError(_, info)) => {
                let message = info.message();
                message.contains("try restarting transaction")
                    || GALERA_NODE_OUT.iter().any(|m| message.contains(m))
                    || message.contains("database is locked")
            }
            _ => false,
        }
    }
}

impl<E: std::error::Error + 'static> From<bb8::RunError<E>> for StoreError {
    fn from(err: bb8::RunError<E>) -> Self {
        StoreError::Pool(err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use diesel::result::{DatabaseErrorKind, Error};

    fn database_error(message: &str) -> StoreError {
        StoreError::Query(Error::DatabaseError(
            DatabaseErrorKind::Unknown,
            Box::new(message.to_string()),
        ))
    }

    #[test]
    fn deadlocks_certification_conflicts_and_busy_locks_are_transient() {
        for message in [
            "Deadlock found when trying to get lock; try restarting transaction",
            "Lock wait timeout exceeded; try restarting transaction",
            "WSREP has not yet prepared node for application use",
            "database is locked",
        ] {
            assert!(database_error(message).is_transient(), "{message}");
        }
        assert!(!database_error("Duplicate entry 'x' for key 'uq'").is_transient());
        let out = "Error while appending streaming replication fragment(provider status: Not \
                   connected to Primary Component)";
        assert!(database_error(out).is_transient());
        assert!(!StoreError::Pool("timed out".into()).is_transient());
    }

    #[test]
    fn a_galera_node_out_of_its_cluster_is_unreachable_not_a_refusal() {
        for message in GALERA_NODE_OUT {
            assert!(database_error(message).is_unreachable(), "{message}");
        }
        assert!(!database_error("Deadlock found when trying to get lock").is_unreachable());
        assert!(!database_error("Duplicate entry 'x' for key 'uq'").is_unreachable());
    }
}
