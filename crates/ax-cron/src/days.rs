//! Day rules: which days of a month the two day fields select, the Quartz
//! forms (`L`, `L-n`, `nW`, `LW`, `nL`, `n#k`) included.
//!
//! A month's matching days depend only on the weekday of its 1st and its
//! length, so the parser folds both fields into one mask per such pair and
//! the search does a single lookup per month.

/// Largest `n` in `L-n` (Quartz's limit: the day stays in the month).
pub(super) const MAX_BEFORE_LAST: u32 = 30;

/// Largest `k` in `n#k`: no month has a sixth of any weekday.
pub(super) const MAX_NTH: u32 = 5;

/// Shortest month; masks are indexed by `length - MIN_MONTH_LEN`.
pub(super) const MIN_MONTH_LEN: u32 = 28;

/// Matching days (bits 1..=31) indexed by the weekday of the month's 1st
/// (0 = Sunday) and by its length minus [`MIN_MONTH_LEN`].
pub(super) type DayMasks = [[u32; 4]; 7];

/// The day-of-month field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct DomSpec {
    /// Plain days, bits 1..=31.
    pub days: u32,
    /// `L-n`: bit `n` (0..=[`MAX_BEFORE_LAST`]); `L` is `L-0`.
    pub before_last: u32,
    /// `nW`: bit `n` (1..=31).
    pub nearest_weekday: u32,
    /// `LW`: the last Monday-to-Friday day of the month.
    pub last_weekday: bool,
}

/// The day-of-week field; weekdays are bits 0..=6, Sunday = 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct DowSpec {
    /// Plain weekdays.
    pub days: u8,
    /// `nL`: the last such weekday of the month.
    pub last: u8,
    /// `n#k`: `nth[k - 1]` holds the weekdays whose k-th occurrence matches.
    pub nth: [u8; MAX_NTH as usize],
}

impl DomSpec {
    /// Every day 1..=31: the field is `*` or `?` (possibly in a list).
    pub const ALL_DAYS: u32 = !1;

    /// The days (bits 1..=len) this field selects in a month of `len` days
    /// whose 1st falls on weekday `first_wd`.
    fn month_days(&self, first_wd: u32, len: u32) -> u32 {
        let mut mask = self.days & month_bits(len);
        for n in set_bits(self.before_last) {
            // `L-n` does not fire in a month too short for it.
            if n < len {
                mask |= 1 << (len - n);
            }
        }
        for n in set_bits(self.nearest_weekday) {
            // Quartz: `30W` does not fire in a month without a 30th.
            if n <= len {
                mask |= 1 << nearest_weekday(first_wd, len, n);
            }
        }
        if self.last_weekday {
            mask |= 1 << last_weekday(first_wd, len);
        }
        mask
    }
}

impl DowSpec {
    /// Every weekday: the field is `*` or `?` (possibly in a list).
    pub const ALL_DAYS: u8 = 0x7f;

    /// See [`DomSpec::month_days`].
    fn month_days(&self, first_wd: u32, len: u32) -> u32 {
        let in_month = month_bits(len);
        let mut mask = every_week(self.days, first_wd) & in_month;
        // The k-th occurrence of a weekday falls in days 7k+1 ..= 7k+7 (k from 0).
        for (k, &weekdays) in (0u32..).zip(&self.nth) {
            mask |= (first_week(weekdays, first_wd) << (7 * k)) & in_month;
        }
        // A weekday's last occurrence falls in the month's last seven days.
        mask |= every_week(self.last, first_wd) & in_month & !month_bits(len - 7);
        mask
    }
}

/// The days 1..=7 (bits) whose weekday is one of `weekdays`, in a month whose 1st falls on
/// `first_wd`.
fn first_week(weekdays: u8, first_wd: u32) -> u32 {
    if weekdays == 0 {
        return 0;
    }
    (1..=7)
        .filter(|&day| weekdays & (1 << weekday(first_wd, day)) != 0)
        .fold(0, |mask, day| mask | 1 << day)
}

/// The days 1..=31 (bits) whose weekday is one of `weekdays`: the first week's, repeated.
fn every_week(weekdays: u8, first_wd: u32) -> u32 {
    let week = u64::from(first_week(weekdays, first_wd));
    let month = (0..5).fold(0, |mask, k| mask | week << (7 * k));
    (month & u64::from(u32::MAX)) as u32
}

/// The days matching both fields, for every (weekday of the 1st, length).
/// Both fields must match (the intersection); `*` selects every day.
pub(super) fn day_masks(dom: &DomSpec, dow: &DowSpec) -> DayMasks {
    let mut masks = [[0u32; 4]; 7];
    for (first_wd, by_len) in (0u32..).zip(masks.iter_mut()) {
        for (len, mask) in (MIN_MONTH_LEN..).zip(by_len.iter_mut()) {
            *mask = dom.month_days(first_wd, len) & dow.month_days(first_wd, len);
        }
    }
    masks
}

/// Weekday (0 = Sunday) of `day` in a month whose 1st falls on `first_wd`.
fn weekday(first_wd: u32, day: u32) -> u32 {
    (first_wd + day - 1) % 7
}

/// Bits 1..=len.
fn month_bits(len: u32) -> u32 {
    ((2u64 << len) - 2) as u32
}

/// The weekday (Monday-Friday) nearest day `n` without leaving the month:
/// Saturday moves back to Friday and Sunday on to Monday, unless that would
/// leave the month, in which case they go the other way.
fn nearest_weekday(first_wd: u32, len: u32, n: u32) -> u32 {
    match weekday(first_wd, n) {
        6 if n > 1 => n - 1,
        6 => n + 2,
        0 if n < len => n + 1,
        0 => n - 2,
        _ => n,
    }
}

/// The last Monday-Friday day of the month.
fn last_weekday(first_wd: u32, len: u32) -> u32 {
    match weekday(first_wd, len) {
        6 => len - 1,
        0 => len - 2,
        _ => len,
    }
}

/// Positions of the set bits of `mask`, lowest first.
pub(super) fn set_bits(mut mask: u32) -> impl Iterator<Item = u32> {
    std::iter::from_fn(move || {
        let bit = (mask != 0).then(|| mask.trailing_zeros());
        mask &= mask.wrapping_sub(1);
        bit
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Days of a 31-day month starting on Monday (the 6th is a Saturday, the 7th a Sunday).
    fn days_mon31(dom: DomSpec) -> Vec<u32> {
        set_bits(dom.month_days(1, 31)).collect()
    }

    #[test]
    fn nearest_weekday_stays_in_the_month() {
        let w = |n: u32| DomSpec {
            nearest_weekday: 1 << n,
            ..DomSpec::default()
        };
        assert_eq!(days_mon31(w(6)), [5]); // Saturday → Friday
        assert_eq!(days_mon31(w(7)), [8]); // Sunday → Monday
        assert_eq!(days_mon31(w(3)), [3]);
        // A month starting on Saturday: 1W is Monday the 3rd, not the month before.
        assert_eq!(set_bits(w(1).month_days(6, 30)).collect::<Vec<_>>(), [3]);
        // A 30-day month ending on Sunday: 30W is Friday the 28th.
        assert_eq!(set_bits(w(30).month_days(6, 30)).collect::<Vec<_>>(), [28]);
        // No 31st in a 30-day month: no fire.
        assert_eq!(w(31).month_days(1, 30), 0);
    }

    #[test]
    fn last_forms() {
        let l = |n: u32| DomSpec {
            before_last: 1 << n,
            ..DomSpec::default()
        };
        assert_eq!(days_mon31(l(0)), [31]);
        assert_eq!(days_mon31(l(30)), [1]);
        assert_eq!(l(30).month_days(1, 30), 0);
        let lw = DomSpec {
            last_weekday: true,
            ..DomSpec::default()
        };
        // 31 days from Monday: the 31st is a Wednesday; from Friday, a Sunday.
        assert_eq!(days_mon31(lw), [31]);
        assert_eq!(set_bits(lw.month_days(5, 31)).collect::<Vec<_>>(), [29]);
        assert_eq!(set_bits(lw.month_days(5, 30)).collect::<Vec<_>>(), [29]);
    }

    #[test]
    fn weekday_forms() {
        let last_friday = DowSpec {
            last: 1 << 5,
            ..DowSpec::default()
        };
        // From Monday, 31 days: Fridays 5, 12, 19, 26.
        assert_eq!(
            set_bits(last_friday.month_days(1, 31)).collect::<Vec<_>>(),
            [26]
        );
        let mut fifth_monday = DowSpec::default();
        fifth_monday.nth[4] = 1 << 1;
        assert_eq!(
            set_bits(fifth_monday.month_days(1, 29)).collect::<Vec<_>>(),
            [29]
        );
        assert_eq!(fifth_monday.month_days(1, 28), 0);
    }

    proptest::proptest! {
        /// The weekday rules, computed a week at a time, select the days that the rules read
        /// day by day select.
        #[test]
        fn weekday_rules_select_day_by_day(
            days in 0u8..0x80,
            last in 0u8..0x80,
            nth in proptest::array::uniform5(0u8..0x80),
            first_wd in 0u32..7,
            len in MIN_MONTH_LEN..=31,
        ) {
            let spec = DowSpec { days, last, nth };
            let by_day = (1..=len)
                .filter(|&day| {
                    let bit = 1u8 << weekday(first_wd, day);
                    let nth = nth[((day - 1) / 7) as usize];
                    days & bit != 0 || nth & bit != 0 || (day + 7 > len && last & bit != 0)
                })
                .fold(0, |mask, day| mask | 1 << day);
            proptest::prop_assert_eq!(spec.month_days(first_wd, len), by_day);
        }

        #[test]
        fn set_bits_lists_each_set_bit(mask: u32) {
            let listed: Vec<u32> = set_bits(mask).collect();
            let expected: Vec<u32> = (0..32).filter(|b| mask & (1 << b) != 0).collect();
            proptest::prop_assert_eq!(listed, expected);
        }
    }

    #[test]
    fn masks_by_length_and_first_weekday() {
        let all = DomSpec {
            days: DomSpec::ALL_DAYS,
            ..DomSpec::default()
        };
        let any = DowSpec {
            days: DowSpec::ALL_DAYS,
            ..DowSpec::default()
        };
        let masks = day_masks(&all, &any);
        for by_len in masks {
            for (len, mask) in (MIN_MONTH_LEN..).zip(by_len) {
                assert_eq!(mask, month_bits(len));
            }
        }
    }
}
