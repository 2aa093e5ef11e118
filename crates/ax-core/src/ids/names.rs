//! Names that serve as ids: an ax process's, a scene's, an executor group's, a calendar's. Each is text in its
//! column and in JSON, and a type of its own in the code, so a function that takes a group's
//! name cannot be handed a scene's or a process's. Whether a name is well formed is the
//! input's rule (the API's and the config's validation), not the type's: a stored name is
//! read back as it was written.

use diesel::deserialize::FromSqlRow;
use diesel::expression::AsExpression;
use diesel::sql_types::Text;
use serde::{Deserialize, Serialize};

/// Declares a name type: text in its column and in JSON, read as a `str` where text is asked.
macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug,
            Clone,
            PartialEq,
            Eq,
            Hash,
            PartialOrd,
            Ord,
            Serialize,
            Deserialize,
            AsExpression,
            FromSqlRow,
        )]
        #[diesel(sql_type = Text)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl From<String> for $name {
            fn from(name: String) -> Self {
                $name(name)
            }
        }

        impl From<&str> for $name {
            fn from(name: &str) -> Self {
                $name(name.to_string())
            }
        }

        impl From<$name> for String {
            fn from(name: $name) -> String {
                name.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        text_column!($name);
    };
}

name_type! {
    /// An ax process's id in a cluster (`server.instance_id`): the Redis lock's holder, a run's
    /// `fired_by`, the process a claim or a heartbeat is of.
    ProcessId
}

name_type! {
    /// A scene's name: the group of tasks a task belongs to (`default` unless given).
    SceneName
}

name_type! {
    /// An executor group's name: the members a task's runs are routed over.
    GroupName
}

name_type! {
    /// A calendar's name: the days off a task's schedule leaves out or moves.
    CalendarName
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_its_text_in_json_and_in_comparisons() {
        let group = GroupName::from("billing");
        assert_eq!(serde_json::to_string(&group).unwrap(), "\"billing\"");
        let read: SceneName = serde_json::from_str("\"etl\"").unwrap();
        assert_eq!(read, "etl");
        assert_eq!(read.as_str(), "etl");
        assert_eq!(String::from(ProcessId::from("ax-1".to_string())), "ax-1");
        let mut names = [GroupName::from("b"), GroupName::from("a")];
        names.sort();
        assert_eq!(names.map(String::from), ["a", "b"]);
    }
}
