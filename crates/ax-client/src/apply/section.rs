//! The sections of named definitions a file of tasks holds beside its tasks.

/// A section of named definitions: its key in the file and how it calls an item.
#[derive(Debug, PartialEq, Eq)]
pub struct Section {
    /// The key in the file, which errors and the count name: `executors`.
    pub key: &'static str,
    /// An item, in errors: `group`.
    pub item: &'static str,
    /// An item's keys, in errors.
    pub shape: &'static str,
    /// An item in the plan's lines: `+ executor billing`.
    pub line: &'static str,
    /// The API's path of the items, each at `{path}/{name}`: `/api/executors`.
    pub path: &'static str,
}

/// `executors: [{name, routing?, maxInFlight?, members?}]`.
pub static EXECUTORS: Section = Section {
    key: "executors",
    item: "group",
    shape: "{name, routing?, maxInFlight?, members?}",
    line: "executor",
    path: "/api/executors",
};

/// `calendars: [{name, dates?, ranges?, weekdays?}]`.
pub static CALENDARS: Section = Section {
    key: "calendars",
    item: "calendar",
    shape: "{name, dates?, ranges?, weekdays?}",
    line: "calendar",
    path: "/api/calendars",
};
