//! What a bench runs on: the store of its ax processes, and how its mock executor reports.

/// Which store the ax processes run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StoreKind {
    /// A fresh SQLite file in a temporary directory.
    Sqlite,
    /// A fresh database on the MariaDB of 127.0.0.1:3306, dropped at the end.
    Mysql,
    /// A fresh database on the PostgreSQL of 127.0.0.1:5432, dropped at the end.
    Postgres,
}

impl StoreKind {
    /// Whether several ax processes can share it.
    pub fn is_shared(self) -> bool {
        self != StoreKind::Sqlite
    }

    pub fn as_str(self) -> &'static str {
        match self {
            StoreKind::Sqlite => "sqlite",
            StoreKind::Mysql => "mysql",
            StoreKind::Postgres => "postgres",
        }
    }
}

/// How the mock executor reports results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// 200 `{"status":"SUCCESS"}` in the reply.
    Sync,
    /// 202, then `POST /api/callback` to one of the ax processes.
    Callback,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Sync => "sync",
            Mode::Callback => "callback",
        }
    }
}
