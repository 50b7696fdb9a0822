//! QEMU's option strings: `-netdev tap,id=n0,ifname=tap0`, `-chardev socket,path=/a,,b.sock`.
//! Parts are separated by single commas; `,,` stands for a comma inside a part.

/// The value of `key` in a QEMU option string `a,key=value,…`; with `implied`, a first element
/// without `=` is that key's value (`-netdev tap,…`, `-name vm1`).
pub fn opt_value(s: &str, key: &str, implied: bool) -> Option<String> {
    let parts = split_opts(s, true);
    for (n, p) in parts.iter().enumerate() {
        match p.split_once('=') {
            Some((k, v)) if k == key => return Some(v.to_string()),
            None if n == 0 && implied => return Some(p.clone()),
            _ => {}
        }
    }
    None
}

/// Splits a QEMU option string at commas; `,,` stands for a literal comma, which `unescape`
/// turns into one (a value to read) or keeps (a part to write back as it was).
pub fn split_opts(s: &str, unescape: bool) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ',' {
            if chars.peek() == Some(&',') {
                chars.next();
                out.last_mut()
                    .unwrap()
                    .push_str(if unescape { "," } else { ",," });
            } else {
                out.push(String::new());
            }
        } else {
            out.last_mut().unwrap().push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubled_commas_are_one_comma_in_a_value_and_kept_in_a_part() {
        let s = "socket,id=m0,path=/tmp/a,,b.sock,server=on";
        assert_eq!(
            split_opts(s, true),
            ["socket", "id=m0", "path=/tmp/a,b.sock", "server=on"]
        );
        assert_eq!(split_opts(s, false)[2], "path=/tmp/a,,b.sock");
        assert_eq!(split_opts("", true), [""]);
        assert_eq!(split_opts("a,", true), ["a", ""]);
    }

    #[test]
    fn a_key_is_found_by_name_or_implied_by_the_first_part() {
        let s = "tap,id=n0,ifname=t,,1";
        assert_eq!(opt_value(s, "ifname", false).as_deref(), Some("t,1"));
        assert_eq!(opt_value(s, "type", true).as_deref(), Some("tap"));
        assert_eq!(opt_value(s, "type", false), None);
        assert_eq!(
            opt_value("type=user,id=x", "type", true).as_deref(),
            Some("user")
        );
        assert_eq!(opt_value(s, "vhost", false), None);
    }
}
