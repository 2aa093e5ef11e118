//! The dependency graph's one rule: no cycles. Pure: the store checks it in the transaction
//! that writes a task's upstreams.

use std::collections::{HashMap, HashSet};

use crate::run::TaskId;

/// The cycle that giving `task` these upstreams would close, if any (as a path from `task`
/// back to itself). `edges` are the existing (task, upstream) pairs; `task`'s own are replaced.
pub fn dependency_cycle(
    edges: &[(TaskId, TaskId)],
    task: TaskId,
    depends_on: &[TaskId],
) -> Option<Vec<TaskId>> {
    let mut upstreams: HashMap<TaskId, Vec<TaskId>> = HashMap::new();
    for &(from, to) in edges.iter().filter(|(from, _)| *from != task) {
        upstreams.entry(from).or_default().push(to);
    }
    upstreams.insert(task, depends_on.to_vec());
    // Depth-first from `task`; a path that comes back to it is the cycle.
    let mut stack = vec![(task, vec![task])];
    let mut seen = HashSet::new();
    while let Some((node, path)) = stack.pop() {
        for &next in upstreams.get(&node).map(Vec::as_slice).unwrap_or(&[]) {
            if next == task {
                let mut cycle = path.clone();
                cycle.push(task);
                return Some(cycle);
            }
            if seen.insert(next) {
                let mut longer = path.clone();
                longer.push(next);
                stack.push((next, longer));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles_are_found_however_long() {
        let ids = |ids: &[i64]| ids.iter().copied().map(TaskId).collect::<Vec<_>>();
        let cycle = |edges: &[(i64, i64)], task: i64, upstreams: &[i64]| {
            let edges: Vec<(TaskId, TaskId)> =
                edges.iter().map(|&(a, b)| (TaskId(a), TaskId(b))).collect();
            dependency_cycle(&edges, TaskId(task), &ids(upstreams))
        };
        // 1 waits on 2, 2 on 3.
        let edges = [(1, 2), (2, 3)];
        assert_eq!(cycle(&edges, 3, &[1]), Some(ids(&[3, 1, 2, 3])));
        assert_eq!(cycle(&edges, 2, &[1]), Some(ids(&[2, 1, 2])));
        assert_eq!(cycle(&edges, 4, &[4]), Some(ids(&[4, 4])));
        assert_eq!(cycle(&edges, 4, &[1, 3]), None);
        // Replacing 2's upstreams removes the edge 2 → 3.
        assert_eq!(cycle(&edges, 2, &[]), None);
        assert_eq!(cycle(&[(1, 2), (2, 1)], 1, &[3]), None);
    }
}
