//! How replies are printed: `-o table|wide|json|yaml` (`--json` is `-o json`).

use serde_json::Value;

use crate::api::error::ClientError;

/// The output format of a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns (a field a line for one object).
    #[default]
    Table,
    /// The table with more columns.
    Wide,
    /// The API's JSON.
    Json,
    /// The API's JSON as YAML.
    Yaml,
}

impl Format {
    /// Whether the reply is printed as data rather than as text for people.
    pub fn is_data(self) -> bool {
        matches!(self, Format::Json | Format::Yaml)
    }
}

/// A column: its title and the JSON key of its cells.
pub type Column = (&'static str, &'static str);

/// Prints `value` as JSON or YAML, or as the text `text` makes of it (told whether wide).
pub fn print(
    format: Format,
    value: &Value,
    text: impl FnOnce(&Value, bool) -> String,
) -> Result<(), ClientError> {
    print!("{}", render(format, value, text)?);
    Ok(())
}

/// What [`print`] prints.
pub fn render(
    format: Format,
    value: &Value,
    text: impl FnOnce(&Value, bool) -> String,
) -> Result<String, ClientError> {
    let unreadable = |err: String| ClientError::Failed(format!("cannot print the reply: {err}"));
    Ok(match format {
        Format::Json => format!("{value:#}\n"),
        Format::Yaml => {
            ax_core::text::yaml::to_string(value).map_err(|err| unreadable(err.to_string()))?
        }
        Format::Table => text(value, false),
        Format::Wide => text(value, true),
    })
}

/// A cell: `-` for null, a string as it is, anything else as JSON.
pub fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Aligned columns with a header line.
pub fn table(columns: &[Column], items: &[Value]) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|item| columns.iter().map(|(_, key)| text(&item[*key])).collect())
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(n, (title, _))| {
            rows.iter()
                .map(|row| row[n].chars().count())
                .chain([title.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(columns.iter().map(|(title, _)| title.to_string()).collect());
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

/// The columns, and with `wide` the extra ones after them.
pub fn columns(base: &[Column], extra: &[Column], wide: bool) -> Vec<Column> {
    match wide {
        true => [base, extra].concat(),
        false => base.to_vec(),
    }
}

/// The items of a listing (`{items: [...]}`).
pub fn items(body: &Value) -> &[Value] {
    body["items"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// `key  value` lines of an object, by key.
pub fn fields(body: &Value) -> String {
    let Some(object) = body.as_object() else {
        return format!("{}\n", text(body));
    };
    let width = object.keys().map(String::len).max().unwrap_or(0);
    object
        .iter()
        .map(|(key, value)| format!("{key:<width$}  {}\n", text(value)))
        .collect()
}

/// The reply of a change: one line for people, the reply itself as data.
pub(crate) fn one_line(
    format: Format,
    reply: &Value,
    line: impl FnOnce() -> String,
) -> Result<(), ClientError> {
    print(format, reply, |_, _| format!("{}\n", line()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_object_is_a_field_a_line_or_data() {
        let body = json!({"id": 3, "status": "PAUSED", "nextRunAt": null});
        assert_eq!(
            fields(&body),
            "id         3\nnextRunAt  -\nstatus     PAUSED\n"
        );
        let yaml = render(Format::Yaml, &body, |_, _| String::new()).expect("yaml");
        assert!(yaml.contains("status: PAUSED"), "{yaml}");
        let json = render(Format::Json, &body, |_, _| String::new()).expect("json");
        assert_eq!(serde_json::from_str::<Value>(&json).ok(), Some(body));
    }

    #[test]
    fn wide_adds_the_extra_columns() {
        let base = [("ID", "id")];
        let extra = [("VERSION", "version")];
        assert_eq!(columns(&base, &extra, false).len(), 1);
        let items = [json!({"id": 1, "version": 4})];
        assert_eq!(
            table(&columns(&base, &extra, true), &items),
            "ID  VERSION\n1   4\n"
        );
    }
}
