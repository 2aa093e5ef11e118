//! The browser of the browser tests: Debian's `chromedriver` driving Debian's Chromium,
//! headless, with a fresh profile each time, through [`fantoccini`]'s WebDriver client. What is
//! ours is what the tests need on top of it: a step that fails names the page it failed on
//! and saves a screenshot of it, waits poll (they never sleep a fixed time), screenshots go to
//! the target dir, and dropping the [`Browser`] kills chromedriver and Chromium, also when the
//! test panics. Every call is async, so the ax running in the same test keeps serving while
//! the browser waits.
//!
//! ```ignore
//! let browser = Browser::start().await;
//! browser.goto(&format!("{base}/console/tasks")).await;
//! browser.find("input[name=q]").await.type_text("nightly").await;
//! browser.find("form.filters button").await.click().await;
//! browser.wait_for_text("td a", "nightly").await;
//! browser.screenshot("tasks-filtered").await;
//! ```

use std::fmt::Display;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::elements::{self, ElementRef};
use fantoccini::error::CmdError;
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{json, Value};

use super::chromedriver::{Driver, CHROMIUM, CHROMIUM_ARGS};

/// A laptop's viewport, the size a browser starts with.
pub const LAPTOP: (u32, u32) = (1280, 800);
/// A phone's viewport (CSS pixels).
pub const PHONE: (u32, u32) = (390, 844);
/// How long the `wait_…` helpers wait.
pub const WAIT: Duration = Duration::from_secs(10);
/// How often the `wait_…` helpers look again.
const POLL: Duration = Duration::from_millis(50);

/// The key of an element reference in W3C WebDriver JSON, as a script returns one.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// The first element matching `arguments[0]` whose rendered text (whitespace runs as one
/// space, as WebDriver reads it; an element not rendered shows nothing) contains
/// `arguments[1]`: `{hit}`, or `{seen}`, every match's text.
const FIND_TEXT: &str = "
    const squeeze = s => s.replace(/\\s+/g, ' ').trim();
    const shown = e => e.getClientRects().length ? squeeze(e.innerText ?? e.textContent) : '';
    const all = Array.from(document.querySelectorAll(arguments[0]));
    const hit = all.find(e => shown(e).includes(squeeze(arguments[1])));
    return hit ? {hit} : {seen: all.map(shown)};
";

/// What the pages logged (chromedriver's log endpoint, which W3C WebDriver lacks): the
/// entries since the last call.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (
            http::Method::POST,
            Some(json!({"type": "browser"}).to_string()),
        )
    }
}

/// One headless Chromium, through one WebDriver session.
pub struct Browser {
    client: Client,
    // Last: dropped after the session's client.
    driver: Driver,
}

impl Browser {
    /// Starts chromedriver and Chromium (laptop size, in the browser's own zone) with a fresh
    /// profile.
    pub async fn start() -> Browser {
        let driver = Driver::spawn();
        let url = format!("http://127.0.0.1:{}", driver.port().await);
        let profile = driver.profile_dir();
        let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|a| a.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        args.push(format!("--window-size={},{}", LAPTOP.0, LAPTOP.1));
        let capabilities = [
            ("browserName", json!("chrome")),
            (
                "goog:chromeOptions",
                json!({"binary": CHROMIUM, "args": args}),
            ),
            ("goog:loggingPrefs", json!({"browser": "ALL"})),
        ];
        // Plain HTTP to the local chromedriver: no TLS.
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(
                capabilities
                    .map(|(key, value)| (key.to_string(), value))
                    .into_iter()
                    .collect(),
            )
            .connect(&url)
            .await
            .unwrap_or_else(|err| panic!("no WebDriver session: {err}\n{}", driver.log()));
        let browser = Browser { client, driver };
        browser.set_window_size(LAPTOP.0, LAPTOP.1).await;
        browser
    }

    /// What `done`, the outcome of `what`, holds; fails the test on an error.
    async fn must<T>(&self, what: impl Display, done: Result<T, CmdError>) -> T {
        match done {
            Ok(value) => value,
            Err(err) => self.fail(&format!("{what}: {err}")).await,
        }
    }

    /// Fails the test: `what` went wrong, on the page it names; saves a screenshot of the page
    /// as `failed-{test name}.png`.
    pub async fn fail<T>(&self, what: &str) -> T {
        let url = match self.client.current_url().await {
            Ok(url) => url.to_string(),
            Err(err) => format!("(no URL: {err})"),
        };
        let test = std::thread::current()
            .name()
            .unwrap_or("test")
            .replace("::", "-");
        let shot = match self.client.screenshot().await {
            Ok(png) => format!(
                "; screenshot: {}",
                save_png(&format!("failed-{test}"), &png).display()
            ),
            Err(_) => String::new(),
        };
        panic!("{what} — at {url}{shot}")
    }

    /// Looks until `look` finds what it looks for; after [`WAIT`], fails the test: no `what`,
    /// and what `look` saw last.
    async fn poll<T>(&self, what: &str, mut look: impl AsyncFnMut() -> Result<T, String>) -> T {
        let deadline = Instant::now() + WAIT;
        loop {
            match look().await {
                Ok(found) => return found,
                Err(seen) if Instant::now() > deadline => {
                    return self.fail(&format!("{what} within {WAIT:?}: {seen}")).await
                }
                Err(_) => actix_rt::time::sleep(POLL).await,
            }
        }
    }

    /// Opens `url` and waits until it has loaded.
    pub async fn goto(&self, url: &str) {
        self.must(format!("open {url}"), self.client.goto(url).await)
            .await;
    }

    /// The page's URL.
    pub async fn current_url(&self) -> String {
        let url = self.client.current_url().await;
        self.must("the URL", url).await.to_string()
    }

    /// The page's title.
    pub async fn title(&self) -> String {
        self.must("the title", self.client.title().await).await
    }

    /// The first element matching `css`, or `None`.
    pub async fn try_find(&self, css: &str) -> Option<Element<'_>> {
        self.found(css, self.client.find(Locator::Css(css)).await)
            .await
    }

    /// The first element matching `css`; fails the test when there is none.
    pub async fn find(&self, css: &str) -> Element<'_> {
        match self.try_find(css).await {
            Some(element) => element,
            None => self.fail(&format!("no element matches {css:?}")).await,
        }
    }

    /// Every element matching `css`, in document order.
    pub async fn find_all(&self, css: &str) -> Vec<Element<'_>> {
        let found = self.client.find_all(Locator::Css(css)).await;
        let found = self.must(format!("find {css:?}"), found).await;
        found.into_iter().map(|e| self.element(e, css)).collect()
    }

    /// Waits until an element matches `css`; returns it.
    pub async fn wait_for(&self, css: &str) -> Element<'_> {
        let wait = self.client.wait().at_most(WAIT).every(POLL);
        let found = wait.for_element(Locator::Css(css)).await;
        let what = format!("no element matched {css:?} within {WAIT:?}");
        self.element(self.must(what, found).await, css)
    }

    /// The first element matching `css` that shows `text` (in its rendered text) now; when
    /// none does, what every match shows.
    pub async fn find_text(&self, css: &str, text: &str) -> Result<Element<'_>, Value> {
        // One script looks at every match at once: read one by one, the elements of a live
        // region the page replaces meanwhile would be stale and never seen.
        let found = self
            .execute_with(FIND_TEXT, vec![json!(css), json!(text)])
            .await;
        match found["hit"][ELEMENT_KEY].as_str() {
            Some(id) => {
                let hit = elements::Element::from_element_id(
                    self.client.clone(),
                    ElementRef::from(id.to_string()),
                );
                Ok(self.element(hit, css))
            }
            None => Err(found["seen"].clone()),
        }
    }

    /// Waits until an element matching `css` shows `text` (in its rendered text); returns it.
    pub async fn wait_for_text(&self, css: &str, text: &str) -> Element<'_> {
        let what = format!("no {css:?} showed {text:?}");
        self.poll(&what, async || {
            self.find_text(css, text)
                .await
                .map_err(|seen| format!("they showed {seen}"))
        })
        .await
    }

    /// Clicks the first `css` element showing `text`; found again when a live page replaced it
    /// between the look and the click.
    pub async fn click_text(&self, css: &str, text: &str) {
        let what = format!("{css:?} {text:?} clicked");
        self.poll(&what, async || {
            let element = self.wait_for_text(css, text).await;
            element.element.click().await.map_err(|err| err.to_string())
        })
        .await
    }

    /// Waits until the script `js` (a function body: `return …`) returns a truthy value;
    /// returns that value.
    pub async fn wait_until(&self, js: &str) -> Value {
        self.poll(&format!("a truthy {js:?}"), async || {
            let value = self.execute(js).await;
            if truthy(&value) {
                Ok(value)
            } else {
                Err(format!("it returned {value}"))
            }
        })
        .await
    }

    /// Waits until the page whose query string holds `part` has loaded: after a form's submit,
    /// the page before it may still be shown, with the same heading.
    pub async fn wait_for_query(&self, part: &str) {
        let js = format!(
            "return location.search.includes({}) && document.readyState === 'complete'",
            Value::String(part.to_string())
        );
        self.wait_until(&js).await;
    }

    /// Runs the script `js` (a function body: `return …` for a result) in the page.
    pub async fn execute(&self, js: &str) -> Value {
        self.execute_with(js, Vec::new()).await
    }

    /// Runs `js` with `arguments` (an [`Element`] passes as [`Element::as_arg`]).
    pub async fn execute_with(&self, js: &str, arguments: Vec<Value>) -> Value {
        let done = self.client.execute(js, arguments).await;
        self.must(format!("script {js:?}"), done).await
    }

    /// Resizes the window so the page's viewport is `width`×`height` CSS pixels.
    pub async fn set_window_size(&self, width: u32, height: u32) {
        let done = self.client.set_window_size(width, height).await;
        self.must("resize", done).await;
        // The window's frame, if any, is not the page's: make the viewport itself that size.
        let inner = self
            .execute("return [window.innerWidth, window.innerHeight]")
            .await;
        let (w, h) = (inner[0].as_u64(), inner[1].as_u64());
        if (w, h) != (Some(width.into()), Some(height.into())) {
            // Grown by what the frame takes: twice the size wanted, less the viewport it gave.
            let grown = |want: u32, got: Option<u64>| {
                u32::try_from((2 * u64::from(want)).saturating_sub(got.unwrap_or(0)))
                    .unwrap_or(want)
            };
            let done = self
                .client
                .set_window_size(grown(width, w), grown(height, h))
                .await;
            self.must("resize", done).await;
        }
    }

    /// The element that has the keyboard focus.
    pub async fn active(&self) -> Element<'_> {
        let found = self.client.active_element().await;
        let found = self.must("the focused element", found).await;
        self.element(found, "(the focused element)")
    }

    /// Presses and releases `key` (a character or a [`fantoccini::key::Key`]) where the focus
    /// is.
    pub async fn press(&self, key: impl Into<char>) {
        let value = key.into();
        let keyboard = KeyActions::new("keyboard".into())
            .then(KeyAction::Down { value })
            .then(KeyAction::Up { value });
        let done = self.client.perform_actions(keyboard).await;
        self.must(format!("press {value:?}"), done).await;
    }

    /// Presses Tab; returns the element that has the focus then.
    pub async fn press_tab(&self) -> Element<'_> {
        self.press(fantoccini::key::Key::Tab).await;
        self.active().await
    }

    /// What the pages logged as errors (script errors, failed loads, refused by a policy)
    /// since the last call.
    pub async fn console_errors(&self) -> Vec<String> {
        let log = self.client.issue_cmd(BrowserLog).await;
        let log = self.must("the browser's log", log).await;
        let entries = log.as_array().cloned().unwrap_or_default();
        entries
            .into_iter()
            .filter(|entry| entry["level"] == "SEVERE")
            .map(|entry| entry["message"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Saves what the viewport shows as `<target dir>/screenshots/{name}.png`; prints and
    /// returns the path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client.screenshot().await;
        let path = save_png(name, &self.must("screenshot", png).await);
        println!("screenshot: {}", path.display());
        path
    }

    fn element(&self, element: elements::Element, css: &str) -> Element<'_> {
        Element {
            browser: self,
            element,
            css: css.to_string(),
        }
    }

    /// The element `found` by `css`; `None` when there is none.
    async fn found(
        &self,
        css: &str,
        found: Result<elements::Element, CmdError>,
    ) -> Option<Element<'_>> {
        match found {
            Ok(element) => Some(self.element(element, css)),
            Err(err) if err.is_no_such_element() => None,
            Err(err) => self.fail(&format!("find {css:?}: {err}")).await,
        }
    }
}

/// An element of the page, found by a CSS selector.
pub struct Element<'b> {
    browser: &'b Browser,
    element: elements::Element,
    /// How it was found, for messages.
    css: String,
}

impl<'b> Element<'b> {
    /// What `done`, the outcome of `what` on it, holds; fails the test on an error.
    async fn must<T>(&self, what: &str, done: Result<T, CmdError>) -> T {
        let css = &self.css;
        self.browser.must(format!("{css:?} {what}"), done).await
    }

    /// Clicks it (scrolled into view first); waits for a navigation it starts.
    pub async fn click(&self) {
        self.must("click", self.element.click().await).await;
    }

    /// Types `text` into it (characters or [`fantoccini::key::Key`]s).
    pub async fn type_text(&self, text: &str) {
        self.must("type", self.element.send_keys(text).await).await;
    }

    /// Empties an input or text area.
    pub async fn clear(&self) {
        self.must("clear", self.element.clear().await).await;
    }

    /// Its rendered text.
    pub async fn text(&self) -> String {
        self.must("text", self.element.text().await).await
    }

    /// An attribute as written in the HTML (`None` when absent).
    pub async fn attr(&self, name: &str) -> Option<String> {
        self.must(name, self.element.attr(name).await).await
    }

    /// The current value of an input, select or text area.
    pub async fn value(&self) -> String {
        let value = self.element.prop("value").await;
        self.must("value", value).await.unwrap_or_default()
    }

    /// A computed CSS property (`outline-style`, `display`, …).
    pub async fn css_value(&self, property: &str) -> String {
        let value = self.element.css_value(property).await;
        self.must(property, value).await
    }

    /// Whether it is shown.
    pub async fn is_displayed(&self) -> bool {
        let shown = self.element.is_displayed().await;
        self.must("displayed", shown).await
    }

    /// The first element under it matching `css`; fails the test when there is none.
    pub async fn find(&self, css: &str) -> Element<'b> {
        let found = self.element.find(Locator::Css(css)).await;
        match self.browser.found(css, found).await {
            Some(element) => element,
            None => {
                let within = &self.css;
                self.browser
                    .fail(&format!("no element matches {css:?} within {within:?}"))
                    .await
            }
        }
    }

    /// Every element under it matching `css`.
    pub async fn find_all(&self, css: &str) -> Vec<Element<'b>> {
        let found = self.element.find_all(Locator::Css(css)).await;
        let found = self.must(&format!("find {css:?}"), found).await;
        let browser = self.browser;
        found.into_iter().map(|e| browser.element(e, css)).collect()
    }

    /// Whether it is the same element of the page as `other`.
    pub fn same_as(&self, other: &Element<'_>) -> bool {
        self.element.element_id() == other.element.element_id()
    }

    /// It as an argument of [`Browser::execute_with`] (`arguments[i]` in the script).
    pub fn as_arg(&self) -> Value {
        json!({ ELEMENT_KEY: self.element.element_id().to_string() })
    }
}

/// Where screenshots go: `$CARGO_TARGET_DIR/screenshots`, else the workspace's
/// `target/screenshots`.
fn screenshot_dir() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(|dir| manifest.join(dir))
        .unwrap_or_else(|| manifest.join("target"));
    target.join("screenshots")
}

/// Writes a PNG as `{name}.png` in the screenshot dir.
fn save_png(name: &str, png: &[u8]) -> PathBuf {
    let dir = screenshot_dir();
    std::fs::create_dir_all(&dir).unwrap_or_else(|err| panic!("{}: {err}", dir.display()));
    let path = dir.join(format!("{name}.png"));
    std::fs::write(&path, png).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    path
}

/// Whether a script's result counts as true, as JavaScript would count it.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}
