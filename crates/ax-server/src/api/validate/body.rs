//! A JSON body's members: an object of known fields, strings, name-like text, integers.

use serde_json::{Map, Value};

use crate::error::ApiError;
use ax_core::text;

/// A JSON object with none but these fields.
pub fn object(value: Value, fields: &[&str]) -> Result<Map<String, Value>, ApiError> {
    let Value::Object(object) = value else {
        return Err(ApiError::invalid_body("the body must be a JSON object"));
    };
    if let Some(unknown) = object.keys().find(|k| !fields.contains(&k.as_str())) {
        return Err(ApiError::invalid(
            unknown.clone(),
            format!("unknown field `{unknown}`"),
        ));
    }
    Ok(object)
}

pub(super) fn required_string(
    body: &mut Map<String, Value>,
    field: &str,
) -> Result<String, ApiError> {
    optional_string(body, field)?
        .ok_or_else(|| ApiError::invalid(field, format!("{field} is required")))
}

pub(super) fn optional_string(
    body: &mut Map<String, Value>,
    field: &str,
) -> Result<Option<String>, ApiError> {
    match body.remove(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::invalid(
            field,
            format!("{field} must be a string"),
        )),
    }
}

/// A name-like string: not blank, at most `max` characters, no control or format characters.
pub(super) fn text(value: String, field: &str, max: usize) -> Result<String, ApiError> {
    if value.trim().is_empty() {
        return Err(ApiError::invalid(
            field,
            format!("{field} must not be empty"),
        ));
    }
    if value.chars().count() > max {
        return Err(ApiError::invalid(
            field,
            format!("{field} is longer than {max} characters"),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            field,
            format!("{field} contains control characters"),
        ));
    }
    // Bidi overrides and zero-width characters make a name look empty or read as another.
    if let Some(c) = value.chars().find(|&c| text::is_format(c)) {
        return Err(ApiError::invalid(
            field,
            format!(
                "{field} contains an invisible Unicode format character (U+{:04X})",
                u32::from(c)
            ),
        ));
    }
    Ok(value)
}

pub(super) fn integer(
    body: &mut Map<String, Value>,
    field: &str,
    (min, max): (i64, i64),
) -> Result<Option<i64>, ApiError> {
    match body.remove(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(ApiError::invalid(
                field,
                format!("{field} must be an integer from {min} to {max}"),
            )),
        },
        Some(_) => Err(ApiError::invalid(
            field,
            format!("{field} must be an integer"),
        )),
    }
}

/// An optional integer whose bounds fit an `i32`.
pub(super) fn small(
    body: &mut Map<String, Value>,
    field: &str,
    bounds: (i64, i64),
) -> Result<Option<i32>, ApiError> {
    Ok(integer(body, field, bounds)?.map(|n| n as i32))
}
