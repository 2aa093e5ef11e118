//! Refusals: why a save did not happen, each beside the field it names and listed in the
//! order the fields are declared.

use crate::error::ApiError;
use ax_core::task::fields;

/// Every refusal of a save, the API's and the editor's own (a field that does not read, an
/// upstream of no task), as one error: the editor's refusal of a field stands for the API's of
/// it, and all are in the order the fields are declared.
pub(super) fn every_refusal(own: Vec<ApiError>, api: Option<ApiError>) -> ApiError {
    let own_fields: Vec<&str> = own
        .iter()
        .filter_map(|err| err.field())
        .map(form_field)
        .collect();
    let mut refusals: Vec<ApiError> = Vec::new();
    if let Some(api) = api {
        let fields = api.field_errors();
        if fields.is_empty() {
            refusals.push(api);
        }
        refusals.extend(
            fields
                .into_iter()
                .filter(|refused| !own_fields.contains(&form_field(&refused.field)))
                .map(|refused| ApiError::invalid(refused.field, refused.message)),
        );
    }
    refusals.extend(own);
    let position = |err: &ApiError| {
        let field = err.field().map(form_field);
        fields::ALL
            .iter()
            .position(|declared| Some(declared.name) == field)
            .unwrap_or(fields::ALL.len())
    };
    refusals.sort_by_key(position);
    ApiError::all(refusals)
}

/// A refusal of a save: the field named, if any, and the message (a calendar's form shows
/// them too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::console) struct Refusal {
    pub(in crate::console) field: Option<String>,
    pub(in crate::console) message: String,
}

/// Why the editor is shown again after a save: refused, or the task changed since the form
/// was opened (the form then shows the task as it is, and the values sent that differ).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Unsaved {
    /// Each field refused (one refusal without a field when the error names none).
    Refused(Vec<Refusal>),
    Changed(Vec<(&'static str, String)>),
}

impl Unsaved {
    pub(super) fn refusals(&self) -> &[Refusal] {
        match self {
            Unsaved::Refused(refusals) => refusals,
            Unsaved::Changed(_) => &[],
        }
    }
}

impl Refusal {
    /// Every field `err` refuses, or its message alone when it names none (a conflict).
    pub(in crate::console) fn all(err: &ApiError) -> Vec<Refusal> {
        let fields = err.field_errors();
        if fields.is_empty() {
            return vec![Refusal {
                field: err.field().map(str::to_string),
                message: err.to_string(),
            }];
        }
        fields
            .into_iter()
            .map(|refused| Refusal {
                field: Some(refused.field),
                message: refused.message,
            })
            .collect()
    }

    /// The message of the refusals of `field`, or of a part of it (`labels.team`).
    pub(in crate::console) fn for_field(refusals: &[Refusal], field: &str) -> Option<String> {
        let messages: Vec<&str> = refusals
            .iter()
            .filter(|r| r.field.as_deref().map(form_field) == Some(field))
            .map(|r| r.message.as_str())
            .collect();
        (!messages.is_empty()).then(|| messages.join("; "))
    }

    /// How the summary names its field: the input's label.
    pub(super) fn label(&self) -> Option<&'static str> {
        fields::named(form_field(self.field.as_deref()?)).map(|declared| declared.label)
    }
}

/// The form's field an error's field is in: `labels` for `labels.team`.
pub(super) fn form_field(field: &str) -> &str {
    field.split('.').next().unwrap_or(field)
}
