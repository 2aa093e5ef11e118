//! Errors returned when parsing a cron expression or a time zone name.

/// Why a cron expression was rejected.
///
/// Field-level variants carry the field name (see [`CronError::field`]) and
/// the offending token exactly as the user wrote it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    /// The expression is empty or only whitespace.
    #[error("empty cron expression")]
    Empty,

    /// An `@` macro that is not one of the supported ones.
    #[error(
        "unknown macro `{0}` (supported: @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly)"
    )]
    UnknownMacro(String),

    /// Neither 5 nor 6 (nor 7) fields were given.
    #[error("wrong number of fields: got {0}, expected 5 (min hour dayOfMonth month dayOfWeek) or 6 (with leading second)")]
    FieldCount(usize),

    /// 7 fields: the Quartz year field.
    #[error("got 7 fields: the Quartz year field is not supported (use 5 or 6 fields)")]
    YearFieldUnsupported,

    /// A number outside the field's range.
    #[error("{field} field: value `{token}` is out of range {min}-{max}")]
    OutOfRange {
        /// Field name.
        field: &'static str,
        /// The offending value as written.
        token: String,
        /// Smallest allowed value.
        min: u32,
        /// Largest allowed value.
        max: u32,
    },

    /// A `/0` step.
    #[error("{field} field: step must not be 0 in `{token}`")]
    ZeroStep {
        /// Field name.
        field: &'static str,
        /// The list item containing the step.
        token: String,
    },

    /// A step larger than the field's range (`*/99` seconds, `*/61` minutes): it never
    /// repeats, so it would fire once a minute (an hour, …) rather than as it reads.
    #[error("{field} field: the step in `{token}` is larger than the field's range of {values} values (a step of at most {values})")]
    StepTooLarge {
        /// Field name.
        field: &'static str,
        /// The list item containing the step.
        token: String,
        /// How many values the field's `*` holds: the largest step.
        values: u32,
    },

    /// A `/` with nothing or a non-number after it.
    #[error("{field} field: missing or non-numeric step in `{token}` (expected a positive integer after `/`)")]
    InvalidStep {
        /// Field name.
        field: &'static str,
        /// The list item containing the step.
        token: String,
    },

    /// A range whose start is greater than its end, e.g. `5-2`.
    #[error("{field} field: range `{token}` is reversed (start is greater than end)")]
    ReversedRange {
        /// Field name.
        field: &'static str,
        /// The range as written.
        token: String,
    },

    /// An empty item in a comma list, e.g. `1,,2` or `1,`.
    #[error("{field} field: empty list item in `{token}`")]
    EmptyListItem {
        /// Field name.
        field: &'static str,
        /// The whole field as written.
        token: String,
    },

    /// Quartz syntax that ax does not support (`H`), or a Quartz form in a
    /// field that does not take it (`L` in the hour field, `#` in dayOfMonth).
    #[error(
        "{field} field: `{token}` is not supported (Quartz forms allowed: L, L-n, nW and LW in dayOfMonth; nL and n#k in dayOfWeek; H is not supported)"
    )]
    QuartzExtension {
        /// Field name.
        field: &'static str,
        /// The list item as written.
        token: String,
    },

    /// A supported Quartz form with a value out of its range, e.g. `L-40`,
    /// `32W`, `MON#6`.
    #[error("{field} field: `{token}` is invalid: {reason}")]
    InvalidQuartz {
        /// Field name.
        field: &'static str,
        /// The list item as written.
        token: String,
        /// What the form takes.
        reason: &'static str,
    },

    /// An `L`, `W` or `#` form inside a range or a step, e.g. `1-L`, `MON#2/2`.
    #[error("{field} field: `{token}` puts an L, W or # form in a range or step; list such forms with commas instead (e.g. `1,L`)")]
    QuartzInRange {
        /// Field name.
        field: &'static str,
        /// The list item as written.
        token: String,
    },

    /// `?` outside day-of-month / day-of-week.
    #[error(
        "{field} field: `{token}` is invalid: `?` is only allowed in dayOfMonth and dayOfWeek"
    )]
    QuestionMarkNotAllowed {
        /// Field name.
        field: &'static str,
        /// The list item as written.
        token: String,
    },

    /// Anything else that is not a number, name, `*`, range or step.
    #[error("{field} field: unknown or malformed token `{token}` (expected a number, a name, `*`, `a-b`, or a `/n` step)")]
    UnknownToken {
        /// Field name.
        field: &'static str,
        /// The offending token as written.
        token: String,
    },

    /// A time zone name the tz database does not know.
    #[error("unknown time zone `{0}` (expected an IANA name such as `Europe/Berlin`, or `UTC`)")]
    UnknownZone(String),

    /// The expression is valid syntax but no date ever matches, e.g. `0 0 0 31 2 *`.
    #[error("expression `{0}` never fires: no date matches its day-of-month, month and day-of-week combination")]
    NeverFires(String),
}

impl CronError {
    /// The field the error is about: `"second"`, `"minute"`, `"hour"`,
    /// `"dayOfMonth"`, `"month"`, `"dayOfWeek"`, or `None` for
    /// whole-expression errors.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            CronError::Empty
            | CronError::UnknownMacro(_)
            | CronError::FieldCount(_)
            | CronError::YearFieldUnsupported
            | CronError::UnknownZone(_)
            | CronError::NeverFires(_) => None,
            CronError::OutOfRange { field, .. }
            | CronError::ZeroStep { field, .. }
            | CronError::StepTooLarge { field, .. }
            | CronError::InvalidStep { field, .. }
            | CronError::ReversedRange { field, .. }
            | CronError::EmptyListItem { field, .. }
            | CronError::QuartzExtension { field, .. }
            | CronError::InvalidQuartz { field, .. }
            | CronError::QuartzInRange { field, .. }
            | CronError::QuestionMarkNotAllowed { field, .. }
            | CronError::UnknownToken { field, .. } => Some(field),
        }
    }
}
