//! No module of the library imports a module that imports it back, directly or through others.
//!
//! Reads the files of the library (its `#[cfg(test)]` code left out: a test may reach
//! anywhere), builds the graph of which file uses an item defined in which other file (through
//! `use`, `super::`, `self::`, or a full path such as `crate::a::b::f()` in code or inside a
//! macro call), and fails with every circle it finds. A path is resolved to the
//! file that defines the item: a `pub use` re-export is followed to the defining file, so a
//! `mod.rs` that re-exports its children is not a dependency of everyone who names them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

type ModId = usize;

/// One module: a file, or an inline `mod name { … }` inside one.
struct Module {
    file: PathBuf,
    parent: Option<ModId>,
    children: HashMap<String, ModId>,
    /// Items defined here (fns, types, consts, …), with the file that defines them.
    items: HashMap<String, PathBuf>,
    /// `use` leaves visible here: the name they bind and the path they name, still relative.
    imports: HashMap<String, Vec<String>>,
    /// `use a::b::*`: the paths whose items are all visible here.
    globs: Vec<Vec<String>>,
}

/// A `use` leaf or a path in code, waiting for the module tree to be complete.
struct Reference {
    module: ModId,
    path: Vec<String>,
}

#[derive(Default)]
struct Crate {
    modules: Vec<Module>,
    references: Vec<Reference>,
}

fn module_file(dir: &Path, name: &str) -> Option<(PathBuf, PathBuf)> {
    let flat = dir.join(format!("{name}.rs"));
    if flat.exists() {
        return Some((flat, dir.join(name)));
    }
    let nested = dir.join(name).join("mod.rs");
    nested.exists().then(|| (nested, dir.join(name)))
}

/// Whether the item is compiled for tests only (`#[cfg(test)]`).
fn test_only(item: &syn::Item) -> bool {
    let attrs = match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => return false,
    };
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && matches!(&attr.meta, syn::Meta::List(list) if list.tokens.to_string() == "test")
    })
}

fn is_public(vis: &syn::Visibility) -> bool {
    !matches!(vis, syn::Visibility::Inherited)
}

impl Crate {
    fn add_module(&mut self, file: PathBuf, parent: Option<ModId>) -> ModId {
        self.modules.push(Module {
            file,
            parent,
            children: HashMap::new(),
            items: HashMap::new(),
            imports: HashMap::new(),
            globs: Vec::new(),
        });
        self.modules.len() - 1
    }

    /// Reads `file` as module `id`, whose child files live in `dir`.
    fn load_file(&mut self, id: ModId, file: &Path, dir: &Path) {
        let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        self.load_items(id, &ast.items, file, dir);
    }

    fn load_items(&mut self, id: ModId, items: &[syn::Item], file: &Path, dir: &Path) {
        let items: Vec<&syn::Item> = items.iter().filter(|item| !test_only(item)).collect();
        let mut used = UsedNames::default();
        for item in &items {
            if !matches!(item, syn::Item::Use(_)) {
                used.visit_item(item);
            }
        }
        for item in items {
            let named = match item {
                syn::Item::Mod(m) => {
                    let name = m.ident.to_string();
                    let child = match &m.content {
                        Some((_, inner)) => {
                            let child = self.add_module(file.to_path_buf(), Some(id));
                            self.load_items(child, inner, file, &dir.join(&name));
                            child
                        }
                        None => {
                            let (child_file, child_dir) =
                                module_file(dir, &name).unwrap_or_else(|| {
                                    panic!("{}: no file for mod {name}", file.display())
                                });
                            let child = self.add_module(child_file.clone(), Some(id));
                            self.load_file(child, &child_file, &child_dir);
                            child
                        }
                    };
                    self.modules[id].children.insert(name, child);
                    None
                }
                syn::Item::Use(u) => {
                    let mut leaves = Vec::new();
                    use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
                    for (binding, path) in leaves {
                        match binding {
                            Some(name) => {
                                // A re-export is part of this module's face, not a use of the
                                // item here, unless this module's own code names it too.
                                if !is_public(&u.vis) || used.names.contains(&name) {
                                    self.references.push(Reference {
                                        module: id,
                                        path: path.clone(),
                                    });
                                }
                                self.modules[id].imports.insert(name, path);
                            }
                            None => {
                                if !is_public(&u.vis) {
                                    self.references.push(Reference {
                                        module: id,
                                        path: path.clone(),
                                    });
                                }
                                self.modules[id].globs.push(path);
                            }
                        }
                    }
                    None
                }
                syn::Item::Fn(f) => Some(f.sig.ident.to_string()),
                syn::Item::Struct(s) => Some(s.ident.to_string()),
                syn::Item::Enum(e) => Some(e.ident.to_string()),
                syn::Item::Union(u) => Some(u.ident.to_string()),
                syn::Item::Const(c) => Some(c.ident.to_string()),
                syn::Item::Static(s) => Some(s.ident.to_string()),
                syn::Item::Type(t) => Some(t.ident.to_string()),
                syn::Item::Trait(t) => Some(t.ident.to_string()),
                syn::Item::TraitAlias(t) => Some(t.ident.to_string()),
                syn::Item::Macro(m) => {
                    if let Some(name) = &m.ident {
                        let exported = m.attrs.iter().any(|a| a.path().is_ident("macro_export"));
                        // An exported macro is named from the crate root.
                        let home = if exported { 0 } else { id };
                        self.modules[home]
                            .items
                            .insert(name.to_string(), file.to_path_buf());
                    }
                    None
                }
                _ => None,
            };
            if let Some(name) = named {
                self.modules[id].items.insert(name, file.to_path_buf());
            }
        }
        for path in used.paths {
            self.references.push(Reference { module: id, path });
        }
    }

    /// The module a path's first segment starts from, and the segments after it; `None` for a
    /// path into another crate or a local name.
    fn start(&self, module: ModId, path: &[String], depth: usize) -> Option<(ModId, Vec<String>)> {
        let (first, rest) = path.split_first()?;
        match first.as_str() {
            "crate" => Some((0, rest.to_vec())),
            "self" => Some((module, rest.to_vec())),
            "super" => Some((self.modules[module].parent?, rest.to_vec())),
            _ => {
                let here = &self.modules[module];
                if here.children.contains_key(first) || here.items.contains_key(first) {
                    Some((module, path.to_vec()))
                } else if let (Some(target), true) = (here.imports.get(first), depth < 32) {
                    // `use a::b; b::c::f()` names what `a::b::c::f` names.
                    let (from, mut full) = self.start(module, target, depth + 1)?;
                    full.extend_from_slice(rest);
                    Some((from, full))
                } else {
                    None
                }
            }
        }
    }

    /// The file that defines what `path` names, seen from `module`.
    fn resolve(&self, module: ModId, path: &[String], depth: usize) -> Option<PathBuf> {
        if depth > 32 {
            return None;
        }
        let (mut at, segments) = self.start(module, path, depth)?;
        for (i, segment) in segments.iter().enumerate() {
            let here = &self.modules[at];
            if segment == "super" {
                at = here.parent?;
                continue;
            }
            if segment == "self" {
                continue;
            }
            if let Some(&child) = here.children.get(segment) {
                at = child;
                continue;
            }
            if let Some(file) = here.items.get(segment) {
                return Some(file.clone());
            }
            if let Some(target) = here.imports.get(segment) {
                let mut full = target.clone();
                full.extend_from_slice(&segments[i + 1..]);
                return self.resolve(at, &full, depth + 1);
            }
            for glob in &here.globs {
                let mut full = glob.clone();
                full.extend_from_slice(&segments[i..]);
                if let Some(file) = self.resolve(at, &full, depth + 1) {
                    return Some(file);
                }
            }
            return None;
        }
        // The path names a module itself (`use crate::store::queries;`): what is used through
        // it is resolved where it is named.
        None
    }
}

/// Every leaf of a `use` tree: the name it binds (`None` for a glob) and its path.
fn use_leaves(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    out: &mut Vec<(Option<String>, Vec<String>)>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                let binding = prefix.last().cloned();
                out.push((binding, prefix.clone()));
            } else {
                let mut path = prefix.clone();
                path.push(name.clone());
                out.push((Some(name), path));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            path.push(r.ident.to_string());
            if r.ident == "self" {
                path.pop();
            }
            out.push((Some(r.rename.to_string()), path));
        }
        syn::UseTree::Glob(_) => out.push((None, prefix.clone())),
        syn::UseTree::Group(g) => {
            for item in &g.items {
                use_leaves(item, prefix, out);
            }
        }
    }
}

/// The paths of more than one segment in code, and every identifier it names.
#[derive(Default)]
struct UsedNames {
    paths: Vec<Vec<String>>,
    names: BTreeSet<String>,
}

impl UsedNames {
    /// Paths inside a macro call's tokens (`format!("{}", crate::a::B)`, maud's `html!`).
    fn scan_tokens(&mut self, tokens: TokenStream) {
        let mut current: Vec<String> = Vec::new();
        let mut colons = 0;
        let flush = |current: &mut Vec<String>, paths: &mut Vec<Vec<String>>| {
            if current.len() > 1 {
                paths.push(std::mem::take(current));
            }
            current.clear();
        };
        for token in tokens {
            match token {
                TokenTree::Ident(ident) => {
                    let name = ident.to_string();
                    self.names.insert(name.clone());
                    if colons == 2 {
                        current.push(name);
                    } else {
                        flush(&mut current, &mut self.paths);
                        current.push(name);
                    }
                    colons = 0;
                }
                TokenTree::Punct(p) if p.as_char() == ':' => colons += 1,
                TokenTree::Group(g) => {
                    flush(&mut current, &mut self.paths);
                    colons = 0;
                    self.scan_tokens(g.stream());
                }
                _ => {
                    flush(&mut current, &mut self.paths);
                    colons = 0;
                }
            }
        }
        flush(&mut current, &mut self.paths);
    }
}

impl<'ast> Visit<'ast> for UsedNames {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.names.extend(segments.iter().cloned());
        if segments.len() > 1 {
            self.paths.push(segments);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_ident(&mut self, ident: &'ast proc_macro2::Ident) {
        self.names.insert(ident.to_string());
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.scan_tokens(mac.tokens.clone());
        syn::visit::visit_macro(self, mac);
    }

    // An inline module's code is read with its own module, which resolves its paths.
    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {}
}

/// Strongly connected groups of more than one file (Tarjan's algorithm).
fn circles(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct State<'g> {
        graph: &'g BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: HashMap<&'g PathBuf, usize>,
        low: HashMap<&'g PathBuf, usize>,
        stack: Vec<&'g PathBuf>,
        on_stack: BTreeSet<&'g PathBuf>,
        groups: Vec<Vec<PathBuf>>,
    }
    fn connect<'g>(s: &mut State<'g>, v: &'g PathBuf) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                connect(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                group.push(w.clone());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                s.groups.push(group);
            }
        }
    }
    let mut state = State {
        graph,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        groups: Vec::new(),
    };
    for v in graph.keys() {
        if !state.index.contains_key(v) {
            connect(&mut state, v);
        }
    }
    state.groups
}

/// Cargo keeps the crates from importing each other; this looks inside each one.
#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut report = String::new();
    let mut read = 0;
    for entry in fs::read_dir(&crates).expect("crates/") {
        let src = entry.expect("a crate").path().join("src");
        if src.join("lib.rs").exists() {
            report.push_str(&circles_in(&src));
            read += 1;
        }
    }
    assert!(read >= 6, "read only {read} crates");
    assert!(
        report.is_empty(),
        "modules that import each other:\n{report}"
    );
}

/// The circles among the modules of the crate whose sources are in `src`, described.
fn circles_in(src: &Path) -> String {
    let mut krate = Crate::default();
    let root = krate.add_module(src.join("lib.rs"), None);
    krate.load_file(root, &src.join("lib.rs"), src);

    let mut graph: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    let mut why: BTreeMap<(PathBuf, PathBuf), BTreeSet<String>> = BTreeMap::new();
    for reference in &krate.references {
        let from = &krate.modules[reference.module].file;
        let Some(to) = krate.resolve(reference.module, &reference.path, 0) else {
            continue;
        };
        if &to != from {
            graph.entry(from.clone()).or_default().insert(to.clone());
            why.entry((from.clone(), to))
                .or_default()
                .insert(reference.path.join("::"));
        }
    }

    let relative = |p: &Path| p.display().to_string();
    let mut report = String::new();
    for group in circles(&graph) {
        let members: BTreeSet<&PathBuf> = group.iter().collect();
        report.push_str(&format!(
            "circle of {} files: {}\n",
            group.len(),
            group
                .iter()
                .map(|p| relative(p))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        for from in &group {
            for to in graph[from].iter().filter(|to| members.contains(to)) {
                let names: Vec<&str> = why[&(from.clone(), to.clone())]
                    .iter()
                    .map(String::as_str)
                    .collect();
                report.push_str(&format!(
                    "  {} -> {}: {}\n",
                    relative(from),
                    relative(to),
                    names.join(", ")
                ));
            }
        }
    }
    report
}
