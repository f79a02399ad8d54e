//! [`CustomToolStore`]: stored custom tool definitions.

use crate::{Area, on_every_backend_of};

#[test]
fn definitions_are_put_replaced_listed_by_name_and_deleted() {
    on_every_backend_of(Area::CustomTools, |db| {
        let tools = db.connect().custom_tools;
        tools.custom_tool_put("b", "{\"v\":1}").unwrap();
        tools.custom_tool_put("a", "{}").unwrap();
        tools.custom_tool_put("b", "{\"v\":2}").unwrap();
        let all = tools.custom_tools().unwrap();
        assert_eq!(all.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        let b = tools.custom_tool_get("b").unwrap().unwrap();
        assert_eq!((b.name.as_str(), b.definition.as_str()), ("b", "{\"v\":2}"));
        assert!(b.updated_ms > 0, "written now: {}", b.updated_ms);
        assert!(tools.custom_tool_delete("a").unwrap());
        assert!(!tools.custom_tool_delete("a").unwrap());
        assert!(tools.custom_tool_get("a").unwrap().is_none());
        assert!(tools.custom_tool_get("never").unwrap().is_none());
    });
}

#[test]
fn definitions_outlive_the_connection_that_stored_them() {
    on_every_backend_of(Area::CustomTools, |db| {
        db.connect().custom_tools.custom_tool_put("hello", "{\"command\":\"echo hi\"}").unwrap();
        let later = db.connect().custom_tools;
        assert_eq!(later.custom_tool_get("hello").unwrap().unwrap().definition, "{\"command\":\"echo hi\"}");
    });
}
