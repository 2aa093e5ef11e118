//! Counters the bench reads of processes and servers, and the small types it keeps them in:
//! a process's CPU time, the database server's and Redis's traffic. No I/O beyond `/proc`.

use anyhow::Context as _;

/// Bytes ax sent and received over the network: HTTP (counted by the mock executor), the
/// database server's and Redis's counters of their clients' traffic.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Traffic {
    pub sent: u64,
    pub received: u64,
}

impl Traffic {
    pub fn plus(self, other: Traffic) -> Traffic {
        Traffic {
            sent: self.sent + other.sent,
            received: self.received + other.received,
        }
    }

    pub fn since(self, before: Traffic) -> Traffic {
        Traffic {
            sent: self.sent.saturating_sub(before.sent),
            received: self.received.saturating_sub(before.received),
        }
    }
}

/// Counters of the whole database server (every client's work).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ServerCounters {
    /// `Questions`: statements clients sent.
    pub statements: u64,
    /// Rows inserted, updated and deleted in tables (`Handler_write`, `_update`, `_delete`;
    /// internal temporary tables aside).
    pub rows_written: u64,
    /// From the clients' side: what they sent (the server's `Bytes_received`) and received.
    pub traffic: Traffic,
}

impl ServerCounters {
    /// What the server did between `before` and this reading.
    pub fn since(&self, before: &ServerCounters) -> ServerCounters {
        ServerCounters {
            statements: self.statements.saturating_sub(before.statements),
            rows_written: self.rows_written.saturating_sub(before.rows_written),
            traffic: self.traffic.since(before.traffic),
        }
    }
}

/// utime + stime of a process, in clock ticks.
pub fn process_cpu_ticks(pid: u32) -> anyhow::Result<u64> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    parse_cpu_ticks(&stat).with_context(|| format!("unexpected format of {path}"))
}

/// utime + stime of a `/proc/<pid>/stat` line, in clock ticks.
pub fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    // Fields after it start at field 3 (state); utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The processes on this machine whose command name is one of `names`.
pub fn find_processes(names: &[&str]) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| names.contains(&comm.trim()))
        })
        .collect()
}

/// A numeric field of Redis's `INFO` text.
pub fn info_field(info: &str, name: &str) -> Option<u64> {
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|value| value.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_utime_plus_stime() {
        let stat = "4242 (ax serve (x)) S 1 4242 4242 0 -1 4194560 1234 0 0 0 \
                    250 70 0 0 20 0 9 0 123456 1000000 2000 18446744073709551615";
        assert_eq!(parse_cpu_ticks(stat), Some(320));
        assert_eq!(parse_cpu_ticks("4242 (ax) S 1"), None);
        let own = std::fs::read_to_string(format!("/proc/{}/stat", std::process::id()));
        assert!(parse_cpu_ticks(&own.expect("stat")).is_some());
    }

    #[test]
    fn redis_info_fields_are_found_by_name() {
        let info = "# Stats\r\ntotal_connections_received:7\r\ntotal_commands_processed:9120\r\n";
        assert_eq!(info_field(info, "total_commands_processed"), Some(9120));
        assert_eq!(info_field(info, "total_commands"), None);
    }

    #[test]
    fn this_process_is_found_by_its_name() {
        let comm = std::fs::read_to_string("/proc/self/comm").expect("comm");
        assert!(find_processes(&[comm.trim()]).contains(&std::process::id()));
        assert_eq!(find_processes(&["no-such-process-name"]), Vec::<u32>::new());
    }
}
