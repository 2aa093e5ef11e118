//! How a setting is declared: `settings!` takes each key once (its field, environment
//! variable, default, kind and doc) and makes the config structs, their defaults and
//! [`SETTINGS`](super::SETTINGS), from which reading, checking and documenting follow.

use std::collections::BTreeMap;

use super::kind::{Kind, Parsed, Refusal, Written};
use super::{Config, HostConfig, NamedToken};
use ax_core::alerting::{AlertRule, Channel};

/// One setting, as `settings!` declares it.
pub struct Setting {
    /// `section.field`, as the config file writes it.
    pub key: &'static str,
    /// The environment variable over the file's value; `None`: set in the file only.
    pub env: Option<&'static str>,
    pub kind: Kind,
    /// The reference's default, where the default value does not say it (`unset` for none).
    pub shown_default: Option<&'static str>,
    /// One line: the reference's meaning column.
    pub doc: &'static str,
    /// Keeps a value in the field; `false` when it does not fit the field's type.
    set: fn(&mut Config, Parsed) -> bool,
    /// The field's value; `None` when unset.
    get: fn(&Config) -> Option<Parsed>,
}

impl Setting {
    /// Called by `settings!` only.
    pub(super) const fn new(
        key: &'static str,
        env: Option<&'static str>,
        kind: Kind,
        shown_default: Option<&'static str>,
        doc: &'static str,
        set: fn(&mut Config, Parsed) -> bool,
        get: fn(&Config) -> Option<Parsed>,
    ) -> Setting {
        Setting {
            key,
            env,
            kind,
            shown_default,
            doc,
            set,
            get,
        }
    }

    /// Reads `written`, checks it and keeps it in `config`.
    pub fn apply(&self, config: &mut Config, written: Written<'_>) -> Result<(), Refusal> {
        let parsed = self.kind.read(written)?;
        if (self.set)(config, parsed) {
            Ok(())
        } else {
            // Only a range wider than its field's type gets here; a test rules that out.
            Err(self.kind.refusal())
        }
    }

    /// The value `config` holds; `None` when unset.
    pub fn value(&self, config: &Config) -> Option<Parsed> {
        (self.get)(config)
    }

    /// The default, as the configuration reference's table shows it.
    pub fn default_shown(&self) -> String {
        match (self.shown_default, self.value(&Config::default())) {
            (Some(shown), _) => shown.to_string(),
            (None, Some(value)) => format!("`{}`", value.shown()),
            (None, None) => "unset".to_string(),
        }
    }
}

/// A field's type, as a setting keeps its value in it.
pub trait Field: Sized {
    /// The value as kept; `None` when `parsed` does not fit.
    fn from_parsed(parsed: Parsed) -> Option<Self>;
    /// The value kept; `None` when unset.
    fn to_parsed(&self) -> Option<Parsed>;
}

macro_rules! number_fields {
    ($($number:ty),*) => {$(
        impl Field for $number {
            fn from_parsed(parsed: Parsed) -> Option<Self> {
                match parsed {
                    Parsed::Number(n) => n.try_into().ok(),
                    _ => None,
                }
            }

            fn to_parsed(&self) -> Option<Parsed> {
                // Every field's type fits in an i128.
                Some(Parsed::Number(*self as i128))
            }
        }
    )*};
}

number_fields!(u16, u32, u64, usize, i64);

impl Field for String {
    fn from_parsed(parsed: Parsed) -> Option<Self> {
        match parsed {
            Parsed::Text(text) => Some(text),
            _ => None,
        }
    }

    fn to_parsed(&self) -> Option<Parsed> {
        Some(Parsed::Text(self.clone()))
    }
}

impl Field for Option<String> {
    fn from_parsed(parsed: Parsed) -> Option<Self> {
        String::from_parsed(parsed).map(Some)
    }

    fn to_parsed(&self) -> Option<Parsed> {
        self.clone().map(Parsed::Text)
    }
}

impl Field for Vec<String> {
    fn from_parsed(parsed: Parsed) -> Option<Self> {
        match parsed {
            Parsed::List(items) => Some(items),
            _ => None,
        }
    }

    fn to_parsed(&self) -> Option<Parsed> {
        Some(Parsed::List(self.clone()))
    }
}

impl Field for Vec<NamedToken> {
    fn from_parsed(parsed: Parsed) -> Option<Self> {
        match parsed {
            Parsed::Tokens(tokens) => Some(tokens),
            _ => None,
        }
    }

    fn to_parsed(&self) -> Option<Parsed> {
        Some(Parsed::Tokens(self.clone()))
    }
}

impl Field for BTreeMap<String, HostConfig> {
    fn from_parsed(parsed: Parsed) -> Option<Self> {
        match parsed {
            Parsed::Hosts(hosts) => Some(hosts),
            _ => None,
        }
    }

    fn to_parsed(&self) -> Option<Parsed> {
        Some(Parsed::Hosts(self.clone()))
    }
}

impl Field for Vec<Channel> {
    fn from_parsed(parsed: Parsed) -> Option<Self> {
        match parsed {
            Parsed::Channels(channels) => Some(channels),
            _ => None,
        }
    }

    fn to_parsed(&self) -> Option<Parsed> {
        Some(Parsed::Channels(self.clone()))
    }
}

impl Field for AlertRule {
    fn from_parsed(parsed: Parsed) -> Option<Self> {
        match parsed {
            Parsed::AlertRule(rule) => Some(rule),
            _ => None,
        }
    }

    fn to_parsed(&self) -> Option<Parsed> {
        Some(Parsed::AlertRule(self.clone()))
    }
}

/// A setting's key: `section.field`, or `section.name` where the field cannot be named as
/// the key (`alerts.default`).
macro_rules! key {
    ($section:ident, $field:ident) => {
        concat!(stringify!($section), ".", stringify!($field))
    };
    ($section:ident, $field:ident, $name:literal) => {
        concat!(stringify!($section), ".", $name)
    };
}

/// `Some(value)`, or `None` when it is left out.
macro_rules! optional {
    () => {
        None
    };
    ($value:expr) => {
        Some($value)
    };
}

/// Declares every setting once, section by section: the section's struct (a field per
/// setting, with its doc), its `Default`, and `SETTINGS`, in the order given.
macro_rules! settings {
    ($(
        $(#[doc = $section_doc:literal])*
        $section:ident: $Section:ident {$(
            $field:ident: $ty:ty {
                $(key: $key:literal,)?
                $(env: $env:literal,)?
                default: $default:expr,
                $(shown: $shown:literal,)?
                kind: $kind:expr,
                doc: $doc:literal $(,)?
            }
        )*}
    )*) => {
        /// All settings of one ax process.
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct Config {$(
            $(#[doc = $section_doc])*
            pub $section: $Section,
        )*}

        $(
            $(#[doc = $section_doc])*
            #[derive(Debug, Clone, PartialEq)]
            pub struct $Section {$(
                #[doc = $doc]
                pub $field: $ty,
            )*}

            impl Default for $Section {
                fn default() -> Self {
                    $Section {$($field: $default,)*}
                }
            }
        )*

        /// Every setting, declared once, in the reference's order.
        pub const SETTINGS: &[$crate::config::declare::Setting] = &[$($(
            $crate::config::declare::Setting::new(
                $crate::config::declare::key!($section, $field $(, $key)?),
                $crate::config::declare::optional!($($env)?),
                $kind,
                $crate::config::declare::optional!($($shown)?),
                $doc,
                |config, parsed| {
                    match <$ty as $crate::config::declare::Field>::from_parsed(parsed) {
                        Some(value) => {
                            config.$section.$field = value;
                            true
                        }
                        None => false,
                    }
                },
                |config| $crate::config::declare::Field::to_parsed(&config.$section.$field),
            ),
        )*)*];
    };
}

pub(crate) use {key, optional, settings};
