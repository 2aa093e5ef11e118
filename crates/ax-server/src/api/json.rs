//! JSON request bodies, parsed one way for every endpoint: a key given twice in an object, at
//! any depth, is refused naming it. Parsers disagree on which of the two counts (ax's took the
//! last), so a proxy or WAF that checked the first would pass a body that means something else.

use std::cell::RefCell;
use std::fmt;

use actix_web::http::header::CONTENT_LENGTH;
use actix_web::{dev, mime, web, FromRequest, HttpMessage, HttpRequest};
use futures_util::future::LocalBoxFuture;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use crate::error::ApiError;

/// A body parsed as JSON, every object's keys distinct; a duplicate is a 400 naming it as the
/// API names fields (`handlerUrl`, `params.region`, `items[3].name`).
pub fn parse(body: &[u8]) -> Result<Value, ApiError> {
    distinct(body).map_err(|(field, err)| ApiError::Invalid {
        field,
        message: format!("invalid JSON body: {err}"),
        more: Vec::new(),
    })
}

/// `text` parsed as JSON, every object's keys distinct; on error, with where the duplicated
/// key is if that was it.
pub fn distinct(text: &[u8]) -> Result<Value, (Option<String>, serde_json::Error)> {
    let duplicate = RefCell::new(None);
    let mut input = serde_json::Deserializer::from_slice(text);
    let seed = Distinct {
        place: &Place::Root,
        duplicate: &duplicate,
    };
    seed.deserialize(&mut input)
        .and_then(|value| input.end().map(|()| value))
        .map_err(|err| (duplicate.into_inner(), err))
}

/// A JSON request body (`application/json`, or any `+json` type such as
/// `application/merge-patch+json`), at most `MAX_BODY_BYTES`, read by [`parse`]: what every
/// handler taking a JSON body extracts, so none can skip the duplicate check.
pub struct JsonBody(pub Value);

impl FromRequest for JsonBody {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<JsonBody, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut dev::Payload) -> Self::Future {
        let json = matches!(req.mime_type(), Ok(Some(mime))
            if mime.subtype() == mime::JSON || mime.suffix() == Some(mime::JSON));
        let declared = req
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok()?.parse::<usize>().ok());
        let given = req
            .headers()
            .get(actix_web::http::header::CONTENT_TYPE)
            .map(|t| String::from_utf8_lossy(t.as_bytes()).into_owned());
        let payload = payload.take();
        Box::pin(async move {
            if !json {
                return Err(ApiError::NotJson(given));
            }
            if declared.is_some_and(|length| length > MAX_BODY_BYTES) {
                return Err(ApiError::TooLarge(MAX_BODY_BYTES));
            }
            let body = body_within_limit(payload, MAX_BODY_BYTES).await?;
            parse(&body).map(JsonBody)
        })
    }
}

/// Where a value sits in the body; written out only to name a duplicated key.
enum Place<'a> {
    Root,
    Key(&'a Place<'a>, &'a str),
    Index(&'a Place<'a>, usize),
}

impl fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Root => Ok(()),
            Place::Key(Place::Root, key) => f.write_str(key),
            Place::Key(parent, key) => write!(f, "{parent}.{key}"),
            Place::Index(parent, index) => write!(f, "{parent}[{index}]"),
        }
    }
}

/// Builds a `Value` as serde_json does, but refuses a key an object already has, leaving
/// where it is in `duplicate`. Depth stays bounded by serde_json's recursion limit.
#[derive(Clone, Copy)]
struct Distinct<'a, 'd> {
    place: &'a Place<'a>,
    duplicate: &'d RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for Distinct<'_, '_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, input: D) -> Result<Value, D::Error> {
        input.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Distinct<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Value, A::Error> {
        let mut array = Vec::with_capacity(items.size_hint().unwrap_or(0));
        loop {
            let place = Place::Index(self.place, array.len());
            let seed = Distinct {
                place: &place,
                ..self
            };
            match items.next_element_seed(seed)? {
                Some(item) => array.push(item),
                None => return Ok(Value::Array(array)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = entries.next_key::<String>()? {
            let place = Place::Key(self.place, &key);
            if object.contains_key(&key) {
                let named = place.to_string();
                let err = de::Error::custom(format_args!("duplicate key `{named}`"));
                *self.duplicate.borrow_mut() = Some(named);
                return Err(err);
            }
            let value = entries.next_value_seed(Distinct {
                place: &place,
                ..self
            })?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Largest bulk registration body: a thousand tasks with room for large params.
pub const MAX_BULK_BODY_BYTES: usize = 16 * 1024 * 1024;

/// A request body read up to `limit` bytes: beyond it a 413 in the JSON error shape, like
/// every other error.
pub async fn body_within_limit(
    mut payload: impl futures_util::Stream<Item = Result<web::Bytes, actix_web::error::PayloadError>>
        + Unpin,
    limit: usize,
) -> Result<Vec<u8>, ApiError> {
    use futures_util::StreamExt;
    let mut body = Vec::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk
            .map_err(|err| ApiError::invalid_body(format!("the body could not be read: {err}")))?;
        if body.len() + chunk.len() > limit {
            return Err(ApiError::TooLarge(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(body: &str) -> (Option<String>, String) {
        match parse(body.as_bytes()) {
            Err(ApiError::Invalid { field, message, .. }) => (field, message),
            other => panic!("{body}: expected a 400, got {other:?}"),
        }
    }

    #[test]
    fn bodies_parse_as_serde_json_parses_them() {
        for body in [
            r#"{"name": "a", "n": -3, "big": 18446744073709551615, "f": 1.5, "e": 1e3}"#,
            r#"[1, "two", null, true, {"a": {"b": []}}, "\u00e9\n"]"#,
            r#"  {"a": 1, "A": 2, "a ": 3}  "#,
            "{}",
            "0",
        ] {
            let expected: Value = serde_json::from_str(body).expect("valid");
            assert_eq!(parse(body.as_bytes()).expect(body), expected, "{body}");
        }
    }

    #[test]
    fn a_key_given_twice_is_named_where_it_is() {
        for (body, field) in [
            (
                r#"{"handlerUrl": "http://a/", "handlerUrl": "http://b/"}"#,
                "handlerUrl",
            ),
            (
                r#"{"params": {"region": "eu", "region": "us"}}"#,
                "params.region",
            ),
            (
                r#"{"items": [{"name": "a"}, {"name": "b", "name": "c"}]}"#,
                "items[1].name",
            ),
            (r#"[[{"x": {"y": 1, "y": 1}}]]"#, "[0][0].x.y"),
            // Escapes are read first: `\u0061` is `a`.
            (r#"{"a": 1, "\u0061": 2}"#, "a"),
        ] {
            let (named, message) = refused(body);
            assert_eq!(named.as_deref(), Some(field), "{body}");
            assert!(
                message.contains(&format!("duplicate key `{field}`")),
                "{message}"
            );
        }
    }

    #[test]
    fn bad_json_names_no_field() {
        for body in ["", "{", r#"{"a": 1} x"#, "\u{ff}", r#"{"a": 1,}"#, "[1, 2"] {
            let (field, message) = refused(body);
            assert_eq!(field, None, "{body:?}");
            assert!(message.starts_with("invalid JSON body: "), "{message}");
        }
        // Nesting stays bounded by serde_json's limit: a refusal, not a stack overflow.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(refused(&deep).0, None);
    }
}
