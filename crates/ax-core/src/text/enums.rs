//! Stored vocabularies and JSON columns, each mapped to its column in one place (the way
//! Vaultwarden maps its enums): an enum whose variants are stored as text, so no status string
//! is spelled anywhere else — not in SQL, not in comparisons; and a type stored as JSON text.

/// Declares an enum stored as `Text`: its names, serde names and diesel mapping.
#[macro_export]
macro_rules! text_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord,
            serde::Serialize, serde::Deserialize,
            diesel::expression::AsExpression, diesel::deserialize::FromSqlRow,
        )]
        #[diesel(sql_type = diesel::sql_types::Text)]
        pub enum $name {
            $(#[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// Every stored name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// The stored and serialized name.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text),+ }
            }

            /// Every name, for messages: `A, B or C`.
            pub fn choices() -> String {
                let names: Vec<&str> = Self::ALL.iter().map(|v| v.as_str()).collect();
                match names.split_last() {
                    Some((last, [])) => last.to_string(),
                    Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                    None => String::new(),
                }
            }

            /// Parses the stored name; `None` for anything else.
            pub fn parse(text: &str) -> Option<Self> {
                match text { $($text => Some(Self::$variant),)+ _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl<DB> diesel::serialize::ToSql<diesel::sql_types::Text, DB> for $name
        where
            DB: diesel::backend::Backend,
            str: diesel::serialize::ToSql<diesel::sql_types::Text, DB>,
        {
            fn to_sql<'b>(
                &'b self,
                out: &mut diesel::serialize::Output<'b, '_, DB>,
            ) -> diesel::serialize::Result {
                self.as_str().to_sql(out)
            }
        }

        impl<DB> diesel::deserialize::FromSql<diesel::sql_types::Text, DB> for $name
        where
            DB: diesel::backend::Backend,
            String: diesel::deserialize::FromSql<diesel::sql_types::Text, DB>,
        {
            fn from_sql(bytes: DB::RawValue<'_>) -> diesel::deserialize::Result<Self> {
                let text = String::from_sql(bytes)?;
                Self::parse(&text).ok_or_else(|| {
                    format!("unknown {} `{text}`", stringify!($name)).into()
                })
            }
        }
    };
}

/// Maps a type stored as JSON text (`Text`) to its column: written by its `to_text`, read back
/// by serde; `$what` names it in the error of a stored value that does not parse.
#[macro_export]
macro_rules! json_text {
    ($name:ty, $what:literal) => {
        impl diesel::serialize::ToSql<diesel::sql_types::Text, diesel::mysql::Mysql> for $name {
            fn to_sql<'b>(
                &'b self,
                out: &mut diesel::serialize::Output<'b, '_, diesel::mysql::Mysql>,
            ) -> diesel::serialize::Result {
                use std::io::Write;
                out.write_all(self.to_text().as_bytes())?;
                Ok(diesel::serialize::IsNull::No)
            }
        }

        impl diesel::serialize::ToSql<diesel::sql_types::Text, diesel::pg::Pg> for $name {
            fn to_sql<'b>(
                &'b self,
                out: &mut diesel::serialize::Output<'b, '_, diesel::pg::Pg>,
            ) -> diesel::serialize::Result {
                use std::io::Write;
                out.write_all(self.to_text().as_bytes())?;
                Ok(diesel::serialize::IsNull::No)
            }
        }

        impl diesel::serialize::ToSql<diesel::sql_types::Text, diesel::sqlite::Sqlite> for $name {
            fn to_sql<'b>(
                &'b self,
                out: &mut diesel::serialize::Output<'b, '_, diesel::sqlite::Sqlite>,
            ) -> diesel::serialize::Result {
                out.set_value(self.to_text());
                Ok(diesel::serialize::IsNull::No)
            }
        }

        impl<DB> diesel::deserialize::FromSql<diesel::sql_types::Text, DB> for $name
        where
            DB: diesel::backend::Backend,
            String: diesel::deserialize::FromSql<diesel::sql_types::Text, DB>,
        {
            fn from_sql(bytes: DB::RawValue<'_>) -> diesel::deserialize::Result<Self> {
                let text = String::from_sql(bytes)?;
                serde_json::from_str(&text)
                    .map_err(|err| format!("stored {} `{text}`: {err}", $what).into())
            }
        }
    };
}
