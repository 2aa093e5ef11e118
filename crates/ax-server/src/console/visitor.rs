//! Who is looking at a console page, and what its forms carry: the CSRF field and the
//! sign-out button. The session (`session.rs`) finds the visitor and checks each form.

use maud::{html, Markup};

use super::notice::Notice;
use super::paths::SIGN_OUT;
use ax_core::security::Principal;

/// The hidden field of every console form.
pub const CSRF_FIELD: &str = "csrf";

/// Who is looking at a page, and what its forms need.
#[derive(Debug, Clone)]
pub struct Visitor {
    pub principal: Principal,
    /// Whether the console asks for a sign-in (tokens are configured): it then offers sign-out.
    pub signed_in: bool,
    /// The value of every form's [`CSRF_FIELD`].
    pub csrf: String,
    /// What the action that led here did (from the redirect's query).
    pub notice: Option<Notice>,
}

impl Visitor {
    /// Whether the page offers changes.
    pub fn may_change(&self) -> bool {
        self.principal.may_change()
    }
}

/// The fields of a submitted console form whose CSRF token checked out. Every console action
/// reads its form through this, so none can skip the check.
#[derive(Debug)]
pub struct Submitted {
    pub(super) fields: Vec<(String, String)>,
}

impl Submitted {
    /// The first value of `name`, trimmed; `None` when absent or empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.trim())
            .filter(|value| !value.is_empty())
    }

    /// Every value of `name` (checkboxes of one name), in order.
    pub fn all<'f>(&'f self, name: &'f str) -> impl Iterator<Item = &'f str> + 'f {
        self.fields
            .iter()
            .filter(move |(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The raw value of `name` (untrimmed, as a textarea sent it).
    pub fn raw(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// The hidden CSRF field of a form.
pub fn csrf_field(visitor: &Visitor) -> Markup {
    html! { input type="hidden" name=(CSRF_FIELD) value=(visitor.csrf); }
}

/// The header's sign-out button.
pub fn sign_out_form(visitor: &Visitor) -> Markup {
    html! {
        form.inline method="post" action=(SIGN_OUT) {
            (csrf_field(visitor))
            span.who { "Signed in as " strong { (visitor.principal.name) } }
            " "
            button type="submit" { "Sign out" }
        }
    }
}
