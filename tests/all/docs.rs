//! The generated parts of `docs/`: the configuration reference (from the settings'
//! declarations), the HTTP API reference (from the OpenAPI document), the CLI reference (from
//! the binary's `--help`) and the executor examples (`examples/executor.rs`, each SDK's). Each lives in
//! its page between `<!-- BEGIN GENERATED name … -->` and `<!-- END GENERATED name -->`; a test
//! fails when the page differs, and `AX_BLESS=1 cargo test --test all docs::` writes it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::common::{config, start_ax, Api, TestStore};

const BLESS: &str = "run AX_BLESS=1 cargo test --test all docs:: to regenerate";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Checks that `page`'s section `name` is `body`; with `AX_BLESS=1`, writes it.
fn check_generated(page: &str, name: &str, body: &str) {
    let path: PathBuf = repo().join(page);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{page}: {err}"));
    let begin = format!("<!-- BEGIN GENERATED {name}");
    let end = format!("<!-- END GENERATED {name} -->");
    let start = text
        .find(&begin)
        .and_then(|at| text[at..].find('\n').map(|nl| at + nl + 1))
        .unwrap_or_else(|| panic!("{page} has no line starting {begin}"));
    let stop = text[start..]
        .find(&end)
        .map(|at| start + at)
        .unwrap_or_else(|| panic!("{page} has no {end} after {begin}"));
    if &text[start..stop] == body {
        return;
    }
    if std::env::var("AX_BLESS").as_deref() == Ok("1") {
        let blessed = format!("{}{body}{}", &text[..start], &text[stop..]);
        std::fs::write(&path, blessed).unwrap_or_else(|err| panic!("{page}: {err}"));
        return;
    }
    let first_difference = text[start..stop]
        .lines()
        .zip(body.lines())
        .find(|(have, want)| have != want)
        .map(|(have, want)| format!("\n  page:      {have}\n  generated: {want}"))
        .unwrap_or_else(|| "\n  (one is longer than the other)".into());
    panic!("{page}: the generated section `{name}` is out of date: {BLESS}{first_difference}");
}

#[test]
fn the_configuration_reference_is_the_declarations() {
    let page = "docs/configuration.md";
    check_generated(
        page,
        "settings",
        &ax_server::config::reference::settings_table(),
    );
    check_generated(
        page,
        "aliases",
        &ax_server::config::reference::aliases_table(),
    );
}

#[test]
fn the_executor_examples_are_the_ones_tested() {
    for (name, file, language) in [
        ("rust-executor", "examples/executor.rs", "rust"),
        (
            "python-sdk-example",
            "sdk/python/examples/reconcile.py",
            "python",
        ),
        ("node-sdk-example", "sdk/node/examples/reconcile.js", "js"),
        (
            "rust-sdk-example",
            "crates/ax-executor/examples/reconcile.rs",
            "rust",
        ),
    ] {
        let source = std::fs::read_to_string(repo().join(file)).expect("example");
        let body = format!("```{language}\n{source}```\n");
        check_generated("docs/executors.md", name, &body);
    }
}

// ---- The HTTP API reference ----

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn the_api_reference_is_the_openapi_document() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "docs")).await;
    let (status, doc) = Api::new(&ax).get("/api/openapi.json").await;
    ax.shutdown().await;
    assert_eq!(status, 200, "{doc}");
    check_generated("docs/api.md", "openapi", &api_reference(&doc));
}

const METHODS: &[&str] = &["get", "head", "post", "put", "patch", "delete"];

/// Every operation (path, then method), then every schema, as Markdown.
fn api_reference(doc: &Value) -> String {
    let mut out = String::new();
    let empty = Map::new();
    let paths = doc["paths"].as_object().unwrap_or(&empty);
    for (path, item) in paths {
        for method in METHODS {
            if let Some(op) = item.get(*method) {
                operation(&mut out, method, path, op);
            }
        }
    }
    out.push_str("### Schemas\n\n");
    let schemas = doc["components"]["schemas"].as_object().unwrap_or(&empty);
    for (name, schema) in schemas {
        let _ = writeln!(out, "#### {name}\n");
        schema_table(&mut out, schema);
    }
    out
}

fn operation(out: &mut String, method: &str, path: &str, op: &Value) {
    let _ = writeln!(out, "#### `{} {path}`\n", method.to_uppercase());
    let summary = op["summary"].as_str().unwrap_or("");
    let auth = match (op.get("security"), method) {
        (None, _) => "none",
        (Some(_), "get" | "head") => "an admin's or a viewer's, when ax has tokens",
        (Some(_), _) => "an admin's, when ax has tokens",
    };
    let _ = writeln!(
        out,
        "{}\n\n`operationId`: `{}`; token: {auth}.\n",
        cell(summary),
        op["operationId"].as_str().unwrap_or("")
    );
    if let Some(parameters) = op["parameters"].as_array().filter(|p| !p.is_empty()) {
        out.push_str("| parameter | in | type | required | meaning |\n|---|---|---|---|---|\n");
        for p in parameters {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} |",
                p["name"].as_str().unwrap_or(""),
                p["in"].as_str().unwrap_or(""),
                type_of(&p["schema"]),
                if p["required"] == Value::Bool(true) {
                    "yes"
                } else {
                    "no"
                },
                cell(p["description"].as_str().unwrap_or("")),
            );
        }
        out.push('\n');
    }
    if let Some(body) = op.get("requestBody") {
        let required = if body["required"] == Value::Bool(true) {
            ""
        } else {
            " (optional)"
        };
        let (media, schema) = media(&body["content"]);
        let _ = writeln!(out, "Body{required}: {media} {}\n", type_of(schema));
    }
    out.push_str("| reply | meaning | body |\n|---|---|---|\n");
    let empty = Map::new();
    let responses = op["responses"].as_object().unwrap_or(&empty);
    let mut codes: Vec<&String> = responses.keys().collect();
    codes.sort();
    for code in codes {
        let response = &responses[code];
        let (media, schema) = media(&response["content"]);
        let body = match schema {
            Value::Null => String::new(),
            schema => format!("{media} {}", type_of(schema)),
        };
        let _ = writeln!(
            out,
            "| {code} | {} | {body} |",
            cell(response["description"].as_str().unwrap_or(""))
        );
    }
    out.push('\n');
}

/// The first media type of a `content` object and its schema.
fn media(content: &Value) -> (String, &Value) {
    match content.as_object().and_then(|c| c.iter().next()) {
        Some((media, value)) => (format!("`{media}`"), &value["schema"]),
        None => (String::new(), &Value::Null),
    }
}

/// A schema in a few words: a link to a named one, else its type.
fn type_of(schema: &Value) -> String {
    if let Some(name) = schema["$ref"].as_str().and_then(|r| r.rsplit('/').next()) {
        return format!("[{name}](#{})", name.to_lowercase());
    }
    if let Some(all) = schema["allOf"].as_array() {
        let parts: Vec<String> = all.iter().map(type_of).collect();
        return parts.join(" and ");
    }
    let mut text = match schema["type"].as_str() {
        Some("array") => format!("array of {}", type_of(&schema["items"])),
        Some("object") if schema.get("properties").is_some() => {
            let names: Vec<String> = schema["properties"]
                .as_object()
                .map(|p| p.keys().map(|k| format!("`{k}`")).collect())
                .unwrap_or_default();
            format!("object {{{}}}", names.join(", "))
        }
        Some(kind) => match schema["format"].as_str() {
            Some(format) => format!("{kind} ({format})"),
            None => kind.to_string(),
        },
        None => "any".to_string(),
    };
    if let Some(values) = schema["enum"].as_array() {
        let values: Vec<String> = values
            .iter()
            .map(|v| format!("`{}`", v.as_str().map_or(v.to_string(), str::to_string)))
            .collect();
        let _ = write!(text, ": {}", values.join(", "));
    }
    if schema["nullable"] == Value::Bool(true) {
        text.push_str(", or null");
    }
    text
}

/// A schema's properties as a table (those of each part of an `allOf`), or its type.
fn schema_table(out: &mut String, schema: &Value) {
    let mut rows = Vec::new();
    let mut parts = vec![schema];
    if let Some(all) = schema["allOf"].as_array() {
        parts = all.iter().collect();
    }
    for part in &parts {
        if let Some(name) = part["$ref"].as_str().and_then(|r| r.rsplit('/').next()) {
            let _ = writeln!(
                out,
                "Every field of [{name}](#{}), and:\n",
                name.to_lowercase()
            );
        }
        let required: Vec<&str> = part["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(properties) = part["properties"].as_object() {
            for (name, property) in properties {
                let mark = if required.contains(&name.as_str()) {
                    " (required)"
                } else {
                    ""
                };
                rows.push(format!(
                    "| `{name}`{mark} | {} | {} |",
                    cell(&type_of(property)),
                    cell(property["description"].as_str().unwrap_or(""))
                ));
            }
        }
    }
    if rows.is_empty() {
        let _ = writeln!(out, "{}\n", type_of(schema));
        return;
    }
    out.push_str("| field | type | meaning |\n|---|---|---|\n");
    for row in rows {
        out.push_str(&row);
        out.push('\n');
    }
    out.push('\n');
}

/// Text fit for one table cell: one line, `|` escaped.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

// ---- The CLI reference ----

#[test]
fn the_cli_reference_is_the_binarys_help() {
    let mut out = String::new();
    help_of(&mut out, &[]);
    check_generated("docs/cli.md", "cli", &out);
}

/// `ax ARGS --help` and, after it, that of each of its subcommands.
fn help_of(out: &mut String, args: &[String]) {
    let mut command = crate::common::ax_command();
    let output = command
        .args(args)
        .arg("--help")
        .env("COLUMNS", "100")
        .output()
        .expect("run ax --help");
    let help = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "ax {args:?} --help: {help}");
    let title = std::iter::once("ax".to_string())
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let _ = writeln!(out, "### `{title}`\n\n```text\n{}\n```\n", help.trim_end());
    for sub in subcommands(&help) {
        let mut deeper = args.to_vec();
        deeper.push(sub);
        help_of(out, &deeper);
    }
}

/// The names listed under `Commands:` (but `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| line.trim_end() != "Commands:")
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        // A description's continuation lines are indented further.
        .filter(|line| !line[2..].starts_with(' '))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}
