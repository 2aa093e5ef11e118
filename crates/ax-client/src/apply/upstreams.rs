//! `dependsOn` in files of tasks. A file names an upstream by id (as the API does), by `name`
//! (a task of the same scene) or by `scene/name`, so that it applies to another ax, whose ids
//! differ. Names are resolved against the file's own tasks and the stored ones; the file's
//! tasks are written upstreams first, and a cycle among them is refused before anything is
//! written. Pure: the caller reads the store.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use ax_core::run::TaskId;
use ax_core::task::fields;

/// A task, by `(scene, name)`.
pub type Key = (String, String);

/// Each task of a file, by key, with its upstreams resolved.
pub type Resolved = Vec<(Key, Vec<Upstream>)>;

/// An upstream as a file writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    Id(i64),
    /// `name` (in the task's own scene) or `scene/name`.
    Name(String),
}

/// An upstream resolved: a task known by scene and name, or the id of one apply did not read
/// (in a scene of neither the file nor its names; the server checks that it exists).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Upstream {
    Task(Key),
    Id(i64),
}

impl Upstream {
    /// How a change or an export shows it: `scene/name`, or `#id`.
    pub fn label(&self) -> String {
        match self {
            Upstream::Task((scene, name)) => format!("{scene}/{name}"),
            Upstream::Id(id) => format!("#{id}"),
        }
    }
}

/// Why a file task's `dependsOn` cannot be used, in the words of the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    /// Not a list of ids and names, or a longer one than a task may have.
    #[error(
        "dependsOn must be a list of at most {max} upstream tasks, each an id or a name \
         (`name` in the task's scene, `scene/name` in another)"
    )]
    NotUpstreams { max: usize },
    /// A name that is no task of the file or of the store.
    #[error(
        "no task is named `{name}` in scene `{scene}`, in the file or stored (another \
         scene's task: scene/name)"
    )]
    Unknown { scene: String, name: String },
    /// A cycle, as its path (the first task again at its end).
    #[error("a cycle of upstreams: {}", path_text(path))]
    Cycle { path: Vec<Key> },
}

/// `s/x → s/y → s/x`.
fn path_text(path: &[Key]) -> String {
    let names: Vec<String> = path.iter().map(|(s, n)| format!("{s}/{n}")).collect();
    names.join(" → ")
}

/// A file task's `dependsOn`: a list of task ids and names.
pub fn written(value: Option<Value>) -> Result<Vec<Written>, UpstreamError> {
    let max = fields::DEPENDS_ON.max();
    let invalid = || UpstreamError::NotUpstreams { max };
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) if items.len() <= max => items,
        Some(_) => return Err(invalid()),
    };
    items
        .into_iter()
        .map(|item| match item {
            Value::Number(n) => n.as_i64().filter(|id| *id > 0).map(Written::Id),
            Value::String(name) if !name.trim().is_empty() => {
                Some(Written::Name(name.trim().to_string()))
            }
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(invalid)
}

/// The tasks a name may mean, in order of preference: a task of the task's own scene by
/// that name, else `scene/name` (scenes hold no `/`; names may). The console's editor reads
/// its upstream lines the same way.
pub fn candidates(scene: &str, name: &str) -> Vec<Key> {
    let mut keys = vec![(scene.to_string(), name.to_string())];
    if let Some((other, name)) = name.split_once('/') {
        keys.push((other.to_string(), name.to_string()));
    }
    keys
}

/// The scenes a file's names may point into, besides the file's own: the stored tasks of
/// these must be read to resolve them.
pub fn named_scenes<'a>(written: impl IntoIterator<Item = &'a Written>) -> BTreeSet<String> {
    written
        .into_iter()
        .filter_map(|upstream| match upstream {
            Written::Name(name) => name.split_once('/').map(|(scene, _)| scene.to_string()),
            Written::Id(_) => None,
        })
        .collect()
}

/// What names and ids resolve against: every task known by key, and the ids of stored ones.
#[derive(Debug, Default)]
pub struct Directory {
    keys: BTreeSet<Key>,
    by_id: BTreeMap<i64, Key>,
}

impl Directory {
    /// `stored`: the stored tasks read, with their ids; `file`: the file's tasks.
    pub fn new<'a>(
        stored: impl IntoIterator<Item = (&'a Key, i64)>,
        file: impl IntoIterator<Item = Key>,
    ) -> Directory {
        let mut directory = Directory::default();
        for (key, id) in stored {
            directory.keys.insert(key.clone());
            directory.by_id.insert(id, key.clone());
        }
        directory.keys.extend(file);
        directory
    }

    /// Stored upstream ids, each by key when its task was read.
    pub fn of_ids(&self, ids: &[TaskId]) -> Vec<Upstream> {
        ids.iter().map(|id| self.of_id(id.0)).collect()
    }

    fn of_id(&self, id: i64) -> Upstream {
        match self.by_id.get(&id) {
            Some(key) => Upstream::Task(key.clone()),
            None => Upstream::Id(id),
        }
    }

    /// A file task's upstreams (`scene`: the task's), without duplicates; an unknown name is
    /// an error in the words of the field.
    pub fn resolve(
        &self,
        scene: &str,
        written: &[Written],
    ) -> Result<Vec<Upstream>, UpstreamError> {
        let mut upstreams = Vec::with_capacity(written.len());
        for upstream in written {
            let resolved = match upstream {
                Written::Id(id) => self.of_id(*id),
                Written::Name(name) => candidates(scene, name)
                    .into_iter()
                    .find(|key| self.keys.contains(key))
                    .map(Upstream::Task)
                    .ok_or_else(|| UpstreamError::Unknown {
                        scene: scene.to_string(),
                        name: name.clone(),
                    })?,
            };
            if !upstreams.contains(&resolved) {
                upstreams.push(resolved);
            }
        }
        Ok(upstreams)
    }

    /// How an export writes an upstream: `scene/name`, or its id when that name would read
    /// back as another task (a task of `scene` is named `scene/name` literally) or the task
    /// is unknown.
    pub fn export_name(&self, scene: &str, id: i64) -> Value {
        match self.by_id.get(&id) {
            Some(key) => {
                let name = format!("{}/{}", key.0, key.1);
                let first = candidates(scene, &name)
                    .into_iter()
                    .find(|key| self.keys.contains(key));
                match first.as_ref() == Some(key) {
                    true => Value::String(name),
                    false => Value::from(id),
                }
            }
            None => Value::from(id),
        }
    }
}

/// The first cycle through one of `starts`, as its path (the first key again at its end).
/// `edges`: each task's upstreams known by key.
pub fn cycle(edges: &BTreeMap<&Key, Vec<&Key>>, starts: &[&Key]) -> Option<Vec<Key>> {
    // Iterative depth-first search: a file's chain of tasks may be long.
    #[derive(PartialEq)]
    enum Seen {
        OnPath,
        Done,
    }
    let mut seen: BTreeMap<&Key, Seen> = BTreeMap::new();
    let no_edges = Vec::new();
    for start in starts {
        if seen.contains_key(start) {
            continue;
        }
        let mut path: Vec<(&Key, usize)> = vec![(start, 0)];
        seen.insert(start, Seen::OnPath);
        while let Some((node, next)) = path.last_mut() {
            let upstreams = edges.get(node).unwrap_or(&no_edges);
            let Some(up) = upstreams.get(*next).copied() else {
                seen.insert(node, Seen::Done);
                path.pop();
                continue;
            };
            *next += 1;
            match seen.get(up) {
                Some(Seen::OnPath) => {
                    let from = path.iter().position(|(key, _)| *key == up).unwrap_or(0);
                    let mut keys: Vec<Key> =
                        path[from..].iter().map(|(key, _)| (*key).clone()).collect();
                    keys.push(up.clone());
                    return Some(keys);
                }
                Some(Seen::Done) => {}
                None => {
                    seen.insert(up, Seen::OnPath);
                    path.push((up, 0));
                }
            }
        }
    }
    None
}

/// The order of the writes: the tasks to write (by index into `upstreams`, each task's key
/// and upstreams) in layers, each after the layers that create its upstreams (`creates`: the
/// keys of tasks not stored yet). Without a cycle among the creates (see `cycle`).
pub fn layers(
    upstreams: &[(Key, Vec<Upstream>)],
    writes: &[usize],
    creates: &BTreeSet<Key>,
) -> Vec<Vec<usize>> {
    let mut pending: Vec<usize> = writes.to_vec();
    let mut written: BTreeSet<&Key> = BTreeSet::new();
    let mut layers = Vec::new();
    while !pending.is_empty() {
        let ready = |n: &usize| {
            upstreams[*n].1.iter().all(|up| match up {
                Upstream::Task(key) => !creates.contains(key) || written.contains(key),
                Upstream::Id(_) => true,
            })
        };
        let (layer, rest): (Vec<usize>, Vec<usize>) = pending.iter().partition(|n| ready(n));
        if layer.is_empty() {
            // A cycle slipped through: one last layer, which the server refuses.
            layers.push(rest);
            break;
        }
        written.extend(layer.iter().map(|n| &upstreams[*n].0));
        layers.push(layer);
        pending = rest;
    }
    layers
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(scene: &str, name: &str) -> Key {
        (scene.to_string(), name.to_string())
    }

    #[test]
    fn upstreams_are_read_as_ids_and_names() {
        let read = written(Some(json!([3, "a", " etl/b "]))).expect("valid");
        assert_eq!(
            read,
            [
                Written::Id(3),
                Written::Name("a".into()),
                Written::Name("etl/b".into())
            ]
        );
        for bad in [
            json!([0]),
            json!([""]),
            json!([1.5]),
            json!("a"),
            json!([{}]),
        ] {
            let err = written(Some(bad.clone())).expect_err(&bad.to_string());
            assert!(err.to_string().starts_with("dependsOn must be"), "{err}");
        }
        assert_eq!(written(None), Ok(Vec::new()));
        assert_eq!(
            named_scenes(&read),
            BTreeSet::from(["etl".to_string()]),
            "the scenes to read"
        );
    }

    #[test]
    fn names_resolve_in_the_task_scene_first_then_by_scene() {
        let stored = [
            (key("s", "a"), 1),
            (key("etl", "b"), 2),
            (key("s", "x/y"), 3),
        ];
        let directory =
            Directory::new(stored.iter().map(|(key, id)| (key, *id)), [key("s", "new")]);
        let resolve = |written: &[Written]| directory.resolve("s", written);
        assert_eq!(
            resolve(&[
                Written::Name("a".into()),
                Written::Name("etl/b".into()),
                Written::Name("new".into()),
                Written::Name("x/y".into()),
                Written::Id(2),
                Written::Id(99),
            ]),
            Ok(vec![
                Upstream::Task(key("s", "a")),
                Upstream::Task(key("etl", "b")),
                Upstream::Task(key("s", "new")),
                Upstream::Task(key("s", "x/y")),
                Upstream::Id(99),
            ]),
            "etl/b by name and by id is one upstream"
        );
        let err = resolve(&[Written::Name("b".into())]).expect_err("b is in etl");
        assert!(err.to_string().contains("`b` in scene `s`"), "{err}");
        assert!(resolve(&[Written::Name("nope/b".into())]).is_err());
        assert_eq!(
            directory.of_ids(&[TaskId(1), TaskId(7)]),
            [Upstream::Task(key("s", "a")), Upstream::Id(7)]
        );
        assert_eq!(Upstream::Task(key("s", "a")).label(), "s/a");
        assert_eq!(Upstream::Id(7).label(), "#7");
    }

    #[test]
    fn an_export_names_upstreams_unless_the_name_would_read_back_as_another_task() {
        let stored = [
            (key("s", "a"), 1),
            (key("etl", "b"), 2),
            (key("t", "etl/b"), 3),
        ];
        let directory = Directory::new(stored.iter().map(|(key, id)| (key, *id)), []);
        assert_eq!(directory.export_name("s", 1), json!("s/a"));
        assert_eq!(directory.export_name("s", 2), json!("etl/b"));
        // In scene t, `etl/b` is t's own task of that name.
        assert_eq!(directory.export_name("t", 2), json!(2));
        assert_eq!(directory.export_name("s", 42), json!(42));
    }

    #[test]
    fn a_cycle_is_found_with_its_path() {
        let (a, b, c, d) = (key("s", "a"), key("s", "b"), key("s", "c"), key("s", "d"));
        let edges = BTreeMap::from([(&a, vec![&b]), (&b, vec![&c]), (&c, vec![&a, &d])]);
        assert_eq!(
            cycle(&edges, &[&a]),
            Some(vec![a.clone(), b.clone(), c.clone(), a.clone()])
        );
        let acyclic = BTreeMap::from([(&a, vec![&b, &c]), (&b, vec![&c]), (&d, vec![&c])]);
        assert_eq!(cycle(&acyclic, &[&a, &b, &c, &d]), None);
        let own = BTreeMap::from([(&d, vec![&d])]);
        assert_eq!(cycle(&own, &[&a, &d]), Some(vec![d.clone(), d.clone()]));
    }

    #[test]
    fn a_long_chain_is_searched_without_recursion() {
        let keys: Vec<Key> = (0..100_000).map(|n| key("s", &n.to_string())).collect();
        let edges: BTreeMap<&Key, Vec<&Key>> = keys
            .windows(2)
            .map(|pair| (&pair[0], vec![&pair[1]]))
            .collect();
        assert_eq!(cycle(&edges, &[&keys[0]]), None);
    }

    #[test]
    fn upstreams_created_in_the_same_apply_are_written_first() {
        let stored = key("s", "stored");
        let tasks = vec![
            (key("s", "c"), vec![Upstream::Task(key("s", "b"))]),
            (key("s", "b"), vec![Upstream::Task(key("s", "a"))]),
            (key("s", "a"), vec![Upstream::Task(stored.clone())]),
            (key("s", "d"), vec![Upstream::Id(5)]),
        ];
        let creates: BTreeSet<Key> = tasks.iter().map(|(key, _)| key.clone()).collect();
        assert_eq!(
            layers(&tasks, &[0, 1, 2, 3], &creates),
            [vec![2, 3], vec![1], vec![0]]
        );
        assert_eq!(layers(&tasks, &[], &creates), Vec::<Vec<usize>>::new());
    }
}
