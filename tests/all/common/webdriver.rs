//! A small W3C WebDriver client for browser tests: Debian's `chromedriver` driving Debian's
//! Chromium, headless, with a fresh profile each time. Every call is async (over awc), so the ax
//! running in the same test keeps serving while the browser waits; waits poll, they never
//! sleep a fixed time. Dropping the [`Browser`] kills chromedriver and Chromium, also when the
//! test panics.
//!
//! ```ignore
//! let browser = Browser::start().await;
//! browser.goto(&format!("{base}/console/tasks")).await;
//! browser.find("input[name=q]").await.type_text("nightly").await;
//! browser.find("form.filters button").await.click().await;
//! browser.wait_for_text("td a", "nightly").await;
//! browser.screenshot("tasks-filtered").await;
//! ```

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use awc::http::Method;
use base64::Engine;
use serde_json::{json, Value};

/// Debian's `chromium` package (`scripts/test.sh` installs it when missing).
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// Debian's `chromium-driver` package, of the same Chromium release.
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The browser's time zone: not UTC, so times shown in the browser's zone read differently
/// (`… UTC+05:30`).
pub const BROWSER_ZONE: &str = "Asia/Kolkata";
/// A laptop's viewport, the size a browser starts with.
pub const LAPTOP: (u32, u32) = (1280, 800);
/// A phone's viewport (CSS pixels).
pub const PHONE: (u32, u32) = (390, 844);
/// How long the `wait_…` helpers wait.
pub const WAIT: Duration = Duration::from_secs(10);

/// Keys for [`Browser::press`], as WebDriver spells them.
pub mod keys {
    pub const TAB: &str = "\u{E004}";
    pub const ENTER: &str = "\u{E007}";
    pub const ESCAPE: &str = "\u{E00C}";
    pub const SHIFT: &str = "\u{E008}";
}

/// Chromium's flags: headless, and quiet — without the background-networking ones it waits on
/// connections the closed test network refuses.
const CHROMIUM_ARGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--lang=en-US",
];

/// The key of an element reference in W3C WebDriver JSON.
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

/// How often the `wait_…` helpers look again.
const POLL: Duration = Duration::from_millis(50);

/// An error WebDriver answered (`no such element`, `stale element reference`, …).
#[derive(Debug)]
pub struct WebDriverError {
    pub error: String,
    pub message: String,
}

impl std::fmt::Display for WebDriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.error, self.message)
    }
}

/// chromedriver in a process group of its own, with Chromium under it, and the temp dir of
/// the profile and the log: all of it goes on drop.
struct Driver {
    child: Child,
    dir: tempfile::TempDir,
}

impl Driver {
    /// Starts chromedriver on a port it picks itself (no race for a free one).
    fn spawn() -> Driver {
        for path in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                std::path::Path::new(path).exists(),
                "{path} is missing: install Debian's chromium and chromium-driver \
                 (scripts/test.sh does)"
            );
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let log = std::fs::File::create(dir.path().join("chromedriver.log")).expect("log file");
        let child = Command::new(CHROMEDRIVER)
            .arg("--port=0")
            .env("TZ", BROWSER_ZONE)
            // Nothing is written to the user's home: Chromium's crash database, say.
            .env("HOME", dir.path())
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .env("XDG_CACHE_HOME", dir.path().join("cache"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|err| panic!("start {CHROMEDRIVER}: {err}"));
        Driver { child, dir }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("chromedriver.log")).unwrap_or_default()
    }

    /// The port chromedriver says it listens on, once it has said so.
    async fn port(&self) -> u16 {
        const STARTED: &str = "started successfully on port ";
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let log = self.log();
            if let Some(at) = log.find(STARTED) {
                let digits: String = log[at + STARTED.len()..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                if let Ok(port) = digits.parse() {
                    return port;
                }
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver did not start within 10 s:\n{log}"
            );
            actix_rt::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // chromedriver and the Chromium it started share its process group; Chromium's crash
        // handlers leave the group but name the temp dir (their database is under its HOME).
        // Killed again until none is left.
        let kill = |target: &str| {
            Command::new("kill")
                .args(["-KILL", "--", target])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success())
        };
        let group = format!("-{}", self.child.id());
        kill(&group);
        let _ = self.child.wait();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let strays = processes_naming(self.dir.path());
            let alive = kill(&group) | strays.iter().fold(false, |any, pid| kill(pid) | any);
            if !alive || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The ids of the processes whose command line names `dir`.
fn processes_naming(dir: &std::path::Path) -> Vec<String> {
    let dir = dir.as_os_str().as_encoded_bytes();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|line| line.windows(dir.len()).any(|part| part == dir))
        })
        .collect()
}

/// One headless Chromium, through one WebDriver session.
pub struct Browser {
    http: awc::Client,
    /// `http://127.0.0.1:{port}/session/{id}`.
    session: String,
    wait: Duration,
    // Last: dropped after the session's client.
    driver: Driver,
}

impl Browser {
    /// Starts chromedriver and Chromium (laptop size, [`BROWSER_ZONE`]) with a fresh profile.
    pub async fn start() -> Browser {
        let driver = Driver::spawn();
        let base = format!("http://127.0.0.1:{}", driver.port().await);
        let http = awc::Client::builder()
            .timeout(Duration::from_secs(60))
            .finish();
        let profile = driver.dir.path().join("profile");
        let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|a| a.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        args.push(format!("--window-size={},{}", LAPTOP.0, LAPTOP.1));
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "pageLoadStrategy": "normal",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let created = send(
            &http,
            Method::POST,
            &format!("{base}/session"),
            Some(capabilities),
        )
        .await
        .unwrap_or_else(|err| panic!("no WebDriver session: {err}\n{}", driver.log()));
        let id = created["sessionId"].as_str().expect("a session id");
        let browser = Browser {
            http,
            session: format!("{base}/session/{id}"),
            wait: WAIT,
            driver,
        };
        browser.set_window_size(LAPTOP.0, LAPTOP.1).await;
        browser
    }

    /// How long the `wait_…` helpers wait from now on ([`WAIT`] at first).
    pub fn set_wait(&mut self, wait: Duration) {
        self.wait = wait;
    }

    /// Sends a command of this session (`path` after `/session/{id}`); its `value`.
    pub async fn try_command(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, WebDriverError> {
        send(&self.http, method, &format!("{}{path}", self.session), body).await
    }

    /// Like [`try_command`](Self::try_command); fails the test, naming the page, on an error.
    pub async fn command(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        match self.try_command(method.clone(), path, body).await {
            Ok(value) => value,
            Err(err) => self.fail(&format!("{method} {path}: {err}")).await,
        }
    }

    /// Fails the test: `what` went wrong, on the page it names; saves a screenshot of the page
    /// as `failed-{test name}.png`.
    pub async fn fail<T>(&self, what: &str) -> T {
        panic!("{}", self.failure(what).await)
    }

    async fn failure(&self, what: &str) -> String {
        let url = self
            .try_command(Method::GET, "/url", None)
            .await
            .map(|url| url.as_str().unwrap_or_default().to_string())
            .unwrap_or_else(|err| format!("(no URL: {err})"));
        let test = std::thread::current()
            .name()
            .unwrap_or("test")
            .replace("::", "-");
        let shot = match self.try_command(Method::GET, "/screenshot", None).await {
            Ok(png) => format!(
                "; screenshot: {}",
                save_png(&format!("failed-{test}"), &png).display()
            ),
            Err(_) => String::new(),
        };
        format!("{what} — at {url}{shot}")
    }

    /// Opens `url` and waits until it has loaded.
    pub async fn goto(&self, url: &str) {
        self.command(Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    /// The page's URL.
    pub async fn current_url(&self) -> String {
        string(self.command(Method::GET, "/url", None).await)
    }

    /// The page's title.
    pub async fn title(&self) -> String {
        string(self.command(Method::GET, "/title", None).await)
    }

    /// The first element matching `css`, or `None`.
    pub async fn try_find(&self, css: &str) -> Option<Element<'_>> {
        self.locate("", css).await
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
        self.locate_all("", css).await
    }

    /// Waits until an element matches `css`; returns it.
    pub async fn wait_for(&self, css: &str) -> Element<'_> {
        let deadline = Instant::now() + self.wait;
        loop {
            if let Some(element) = self.try_find(css).await {
                return element;
            }
            if Instant::now() > deadline {
                return self
                    .fail(&format!(
                        "no element matched {css:?} within {:?}",
                        self.wait
                    ))
                    .await;
            }
            actix_rt::time::sleep(POLL).await;
        }
    }

    /// The first element matching `css` that shows `text` (in its rendered text) now; when
    /// none does, what every match shows.
    pub async fn find_text(&self, css: &str, text: &str) -> Result<Element<'_>, Value> {
        // One script looks at every match at once: read one by one, the elements of a live
        // region the page replaces meanwhile would be stale and never seen.
        let found = self
            .execute_with(FIND_TEXT, vec![json!(css), json!(text)])
            .await;
        match &found["hit"] {
            Value::Null => Err(found["seen"].clone()),
            hit => Ok(self.element(hit, css)),
        }
    }

    /// Waits until an element matching `css` shows `text` (in its rendered text); returns it.
    pub async fn wait_for_text(&self, css: &str, text: &str) -> Element<'_> {
        let deadline = Instant::now() + self.wait;
        loop {
            let seen = match self.find_text(css, text).await {
                Ok(element) => return element,
                Err(seen) => seen,
            };
            if Instant::now() > deadline {
                return self
                    .fail(&format!(
                        "no {css:?} showed {text:?} within {:?}; they showed {seen}",
                        self.wait
                    ))
                    .await;
            }
            actix_rt::time::sleep(POLL).await;
        }
    }

    /// Clicks the first `css` element showing `text`; found again when a live page replaced it
    /// between the look and the click.
    pub async fn click_text(&self, css: &str, text: &str) {
        let deadline = Instant::now() + self.wait;
        loop {
            let element = self.wait_for_text(css, text).await;
            let path = format!("/element/{}/click", element.id);
            match self.try_command(Method::POST, &path, Some(json!({}))).await {
                Ok(_) => return,
                Err(err) if Instant::now() > deadline => {
                    return self.fail(&format!("{css:?} {text:?}/click: {err}")).await
                }
                Err(_) => actix_rt::time::sleep(POLL).await,
            }
        }
    }

    /// Waits until the script `js` (a function body: `return …`) returns a truthy value;
    /// returns that value.
    pub async fn wait_until(&self, js: &str) -> Value {
        let deadline = Instant::now() + self.wait;
        loop {
            let value = self.execute(js).await;
            if truthy(&value) {
                return value;
            }
            if Instant::now() > deadline {
                return self
                    .fail(&format!(
                        "{js:?} still returned {value} after {:?}",
                        self.wait
                    ))
                    .await;
            }
            actix_rt::time::sleep(POLL).await;
        }
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
        let body = json!({"script": js, "args": arguments});
        self.command(Method::POST, "/execute/sync", Some(body))
            .await
    }

    /// Resizes the window so the page's viewport is `width`×`height` CSS pixels.
    pub async fn set_window_size(&self, width: u32, height: u32) {
        let rect = json!({"width": width, "height": height});
        self.command(Method::POST, "/window/rect", Some(rect)).await;
        // The window's frame, if any, is not the page's: make the viewport itself that size.
        let inner = self
            .execute("return [window.innerWidth, window.innerHeight]")
            .await;
        let (w, h) = (inner[0].as_u64(), inner[1].as_u64());
        if (w, h) != (Some(width.into()), Some(height.into())) {
            let (w, h) = (w.unwrap_or(0) as i64, h.unwrap_or(0) as i64);
            let rect = json!({
                "width": 2 * i64::from(width) - w, "height": 2 * i64::from(height) - h,
            });
            self.command(Method::POST, "/window/rect", Some(rect)).await;
        }
    }

    /// The element that has the keyboard focus.
    pub async fn active(&self) -> Element<'_> {
        let found = self.command(Method::GET, "/element/active", None).await;
        self.element(&found, "(the focused element)")
    }

    /// Presses and releases `key` (a character or one of [`keys`]) where the focus is.
    pub async fn press(&self, key: &str) {
        let actions = json!({"actions": [{"type": "key", "id": "keyboard", "actions": [
            {"type": "keyDown", "value": key}, {"type": "keyUp", "value": key},
        ]}]});
        self.command(Method::POST, "/actions", Some(actions)).await;
    }

    /// Presses Tab; returns the element that has the focus then.
    pub async fn press_tab(&self) -> Element<'_> {
        self.press(keys::TAB).await;
        self.active().await
    }

    /// What the pages logged as errors (script errors, failed loads, refused by a policy)
    /// since the last call.
    pub async fn console_errors(&self) -> Vec<String> {
        let log = self
            .command(Method::POST, "/se/log", Some(json!({"type": "browser"})))
            .await;
        let entries = log.as_array().cloned().unwrap_or_default();
        entries
            .into_iter()
            .filter(|entry| entry["level"] == "SEVERE")
            .map(|entry| string(entry["message"].clone()))
            .collect()
    }

    /// Saves what the viewport shows as `<target dir>/screenshots/{name}.png`; prints and
    /// returns the path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.command(Method::GET, "/screenshot", None).await;
        let path = save_png(name, &png);
        println!("screenshot: {}", path.display());
        path
    }

    fn element(&self, found: &Value, css: &str) -> Element<'_> {
        let id = found[ELEMENT_KEY]
            .as_str()
            .unwrap_or_else(|| panic!("not an element reference: {found}"));
        Element {
            browser: self,
            id: id.to_string(),
            css: css.to_string(),
        }
    }

    /// The first match of `css` under `parent` (`""` for the document, `/element/{id}`).
    async fn locate(&self, parent: &str, css: &str) -> Option<Element<'_>> {
        let query = json!({"using": "css selector", "value": css});
        match self
            .try_command(Method::POST, &format!("{parent}/element"), Some(query))
            .await
        {
            Ok(found) => Some(self.element(&found, css)),
            Err(err) if err.error == "no such element" => None,
            Err(err) => self.fail(&format!("find {css:?}: {err}")).await,
        }
    }

    async fn locate_all(&self, parent: &str, css: &str) -> Vec<Element<'_>> {
        let query = json!({"using": "css selector", "value": css});
        let found = self
            .command(Method::POST, &format!("{parent}/elements"), Some(query))
            .await;
        found
            .as_array()
            .map(|all| all.iter().map(|one| self.element(one, css)).collect())
            .unwrap_or_default()
    }
}

/// An element of the page, found by a CSS selector.
pub struct Element<'b> {
    browser: &'b Browser,
    id: String,
    /// How it was found, for messages.
    css: String,
}

impl<'b> Element<'b> {
    async fn call(&self, method: Method, what: &str, body: Option<Value>) -> Value {
        let path = format!("/element/{}{what}", self.id);
        match self.browser.try_command(method, &path, body).await {
            Ok(value) => value,
            Err(err) => {
                let css = &self.css;
                self.browser.fail(&format!("{css:?}{what}: {err}")).await
            }
        }
    }

    /// Clicks it (scrolled into view first); waits for a navigation it starts.
    pub async fn click(&self) {
        self.call(Method::POST, "/click", Some(json!({}))).await;
    }

    /// Types `text` into it (characters or [`keys`]).
    pub async fn type_text(&self, text: &str) {
        self.call(Method::POST, "/value", Some(json!({"text": text})))
            .await;
    }

    /// Empties an input or text area.
    pub async fn clear(&self) {
        self.call(Method::POST, "/clear", Some(json!({}))).await;
    }

    /// Its rendered text.
    pub async fn text(&self) -> String {
        string(self.call(Method::GET, "/text", None).await)
    }

    /// An attribute as written in the HTML (`None` when absent).
    pub async fn attr(&self, name: &str) -> Option<String> {
        let value = self
            .call(Method::GET, &format!("/attribute/{name}"), None)
            .await;
        value.as_str().map(str::to_string)
    }

    /// The current value of an input, select or text area.
    pub async fn value(&self) -> String {
        string(self.call(Method::GET, "/property/value", None).await)
    }

    /// A computed CSS property (`outline-style`, `display`, …).
    pub async fn css_value(&self, property: &str) -> String {
        string(
            self.call(Method::GET, &format!("/css/{property}"), None)
                .await,
        )
    }

    /// Whether it is shown.
    pub async fn is_displayed(&self) -> bool {
        self.call(Method::GET, "/displayed", None).await == Value::Bool(true)
    }

    /// The first element under it matching `css`; fails the test when there is none.
    pub async fn find(&self, css: &str) -> Element<'b> {
        match self
            .browser
            .locate(&format!("/element/{}", self.id), css)
            .await
        {
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
        self.browser
            .locate_all(&format!("/element/{}", self.id), css)
            .await
    }

    /// Whether it is the same element of the page as `other`.
    pub fn same_as(&self, other: &Element<'_>) -> bool {
        self.id == other.id
    }

    /// It as an argument of [`Browser::execute_with`] (`arguments[i]` in the script).
    pub fn as_arg(&self) -> Value {
        json!({ ELEMENT_KEY: self.id })
    }
}

/// One WebDriver request; its `value`, or the error it answered.
async fn send(
    http: &awc::Client,
    method: Method,
    url: &str,
    body: Option<Value>,
) -> Result<Value, WebDriverError> {
    let request = http.request(method, url);
    let sent = match body {
        Some(body) => request.send_json(&body).await,
        None => request.send().await,
    };
    let mut response = sent.map_err(|err| WebDriverError {
        error: "no answer".into(),
        message: err.to_string(),
    })?;
    let bytes = response
        .body()
        .limit(64 << 20)
        .await
        .map_err(|err| WebDriverError {
            error: "unreadable answer".into(),
            message: err.to_string(),
        })?;
    let mut answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let value = answer["value"].take();
    match value["error"].as_str() {
        Some(error) if !response.status().is_success() => Err(WebDriverError {
            error: error.to_string(),
            message: value["message"].as_str().unwrap_or_default().to_string(),
        }),
        _ => Ok(value),
    }
}

/// Where screenshots go: `$CARGO_TARGET_DIR/screenshots`, else the workspace's
/// `target/screenshots`.
pub fn screenshot_dir() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(|dir| manifest.join(dir))
        .unwrap_or_else(|| manifest.join("target"));
    target.join("screenshots")
}

/// Writes a base64 PNG as `{name}.png` in the screenshot dir.
fn save_png(name: &str, base64_png: &Value) -> PathBuf {
    let png = base64::engine::general_purpose::STANDARD
        .decode(base64_png.as_str().unwrap_or_default())
        .expect("a base64 screenshot");
    let dir = screenshot_dir();
    std::fs::create_dir_all(&dir).unwrap_or_else(|err| panic!("{}: {err}", dir.display()));
    let path = dir.join(format!("{name}.png"));
    std::fs::write(&path, png).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    path
}

fn string(value: Value) -> String {
    match value {
        Value::String(text) => text,
        Value::Null => String::new(),
        other => other.to_string(),
    }
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
