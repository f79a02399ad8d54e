//! Principal names: they appear in logs, on the page, in audit rows and as workspace folder
//! names, so they are short, printable and path-safe.

use crate::GatewayError;

/// The longest name accepted.
const MAX_LEN: usize = 64;

/// Checks that `name` can name a user, group or agent: 1 to 64 characters from ASCII letters,
/// digits and `. _ - @`, starting with a letter or digit (so it is never `.`, `..` or a
/// hidden folder, and no shell or HTML metacharacter reaches where it is shown).
pub fn check_name(name: &str) -> Result<(), GatewayError> {
    let bad = |why| Err(GatewayError::BadName { name: name.chars().take(80).collect(), why });
    if name.is_empty() || name.len() > MAX_LEN {
        return bad("a name has 1 to 64 characters");
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return bad("a name starts with a letter or a digit");
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@')) {
        return bad("a name has only ASCII letters, digits and . _ - @");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_path_and_markup_safe() {
        for ok in ["ann", "ann.lee@example.com", "ci-bot_2", "0x"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        let long = "a".repeat(65);
        for bad in ["", ".", "..", ".hidden", "-x", "a/b", "a b", "<script>", "ann\n", "é", long.as_str()] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
