//! `lvms explain`'s text: what is wrong first (conditions, what holds it back), then the story.
//! Long messages are cut so the answer fits a screen; `-o json` has them whole.

use std::fmt::Write;

use super::story::Explanation;

const WIDTH: usize = 220;
/// Holdbacks shown in text (1000 failed nodes must not push the rest off the screen).
const HOLDBACKS: usize = 8;

fn cut(s: &str) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= WIDTH {
        one_line
    } else {
        let mut t: String = one_line.chars().take(WIDTH).collect();
        t.push_str("...");
        t
    }
}

/// The explanation as text, for a terminal.
pub fn render_text(e: &Explanation) -> String {
    let mut o = String::new();
    // Writing to a String cannot fail.
    let _ = write_text(&mut o, e);
    o
}

fn write_text(o: &mut String, e: &Explanation) -> std::fmt::Result {
    writeln!(o, "{}", e.subject)?;
    if !e.found {
        writeln!(
            o,
            "  not found on the API server (the journals below may say what became of it)"
        )?;
    }
    if !e.state.is_empty() {
        writeln!(o, "  {}", cut(&e.state.join(" | ")))?;
    }
    for c in &e.conditions {
        let mark = if c.status == "True" { "ok " } else { "NOT" };
        writeln!(
            o,
            "  {mark} {}={} ({}): {}",
            c.type_,
            c.status,
            c.reason,
            cut(&c.message)
        )?;
    }
    if e.held_back.is_empty() {
        writeln!(
            o,
            "Held back by: nothing the status, Events or journals show"
        )?;
    } else {
        writeln!(o, "Held back by:")?;
    }
    for h in e.held_back.iter().take(HOLDBACKS) {
        let mut who = Vec::new();
        if let Some(n) = &h.node {
            who.push(format!("node {n}"));
        }
        if let Some(c) = &h.class {
            who.push(format!("class {c}"));
        }
        let who = if who.is_empty() {
            "-".into()
        } else {
            who.join(", ")
        };
        write!(o, "  {who}: {}", h.status)?;
        if !h.reason.is_empty() {
            write!(o, ": {}", cut(&h.reason))?;
        }
        writeln!(o)?;
        if let Some(s) = &h.step {
            let at = match s.seq {
                Some(seq) => format!("{} journal, seq {seq}, {}", s.source, s.at),
                None => format!("Warning Event, {}", s.at),
            };
            writeln!(o, "    failing step: {} ({at})", s.step)?;
            writeln!(o, "      {}", cut(&s.error))?;
            if let Some(t) = &s.trace_id {
                writeln!(o, "      trace {t}")?;
            }
        }
    }
    if e.held_back.len() > HOLDBACKS {
        writeln!(
            o,
            "  ... and {} more (-o json lists them all)",
            e.held_back.len() - HOLDBACKS
        )?;
    }
    if e.open_intents.is_empty() {
        writeln!(o, "Open intents: none")?;
    } else {
        writeln!(
            o,
            "Open intents (replay resolves them when their unit runs again):"
        )?;
        for s in e.open_intents.iter().take(HOLDBACKS) {
            writeln!(
                o,
                "  [{}] seq {} {} {} {} on {} (trace {})",
                s.source, s.seq, s.at, s.unit, s.action, s.object, s.trace_id
            )?;
        }
    }
    if !e.events.is_empty() {
        writeln!(o, "Events (newest first):")?;
        for ev in &e.events {
            writeln!(
                o,
                "  {} {} {} x{} on {}: {}",
                ev.at,
                ev.type_,
                ev.reason,
                ev.count,
                ev.object,
                cut(&ev.message)
            )?;
        }
    }
    writeln!(
        o,
        "Journal records (newest {} of {}):",
        e.records.len(),
        e.records_matched
    )?;
    for l in &e.records {
        writeln!(
            o,
            "  [{}] seq {} {} {} {} {} {}",
            l.source,
            l.seq,
            l.at,
            l.unit,
            l.object,
            l.record,
            cut(&l.result)
        )?;
    }
    if !e.traces.is_empty() {
        writeln!(o, "Traces:")?;
        for t in &e.traces {
            match &t.url {
                Some(u) => writeln!(o, "  {} {u}", t.trace_id)?,
                None => writeln!(o, "  {}", t.trace_id)?,
            }
        }
    }
    let read: Vec<String> = e
        .journals
        .iter()
        .map(|j| match &j.error {
            Some(err) => format!("{} ({}): not read: {}", j.source, j.path, err),
            None if j.corrupt.is_empty() => {
                format!("{} ({}): {} records", j.source, j.path, j.records)
            }
            None => format!(
                "{} ({}): {} records, {} CORRUPT: {}",
                j.source,
                j.path,
                j.records,
                j.corrupt.len(),
                j.corrupt.join("; ")
            ),
        })
        .collect();
    if read.is_empty() {
        writeln!(
            o,
            "Journals: none given (--journal DIR, --node-journal NODE=DIR)"
        )?;
    } else {
        writeln!(o, "Journals: {}", read.join("; "))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::holdback::Holdback;
    use crate::explain::story::Explanation;

    #[test]
    fn a_thousand_failed_nodes_still_fit_a_screen_with_the_first_named() {
        let e = Explanation {
            subject: "LVMCluster/ns/c".into(),
            found: true,
            state: vec!["state Failed".into()],
            conditions: vec![],
            held_back: (0..1000)
                .map(|i| Holdback {
                    node: Some(format!("node-{i}")),
                    class: Some("vg1".into()),
                    status: "Failed".into(),
                    reason: "x".repeat(1000),
                    step: None,
                })
                .collect(),
            open_intents: vec![],
            events: vec![],
            records: vec![],
            records_matched: 0,
            traces: vec![],
            journals: vec![],
        };
        let text = render_text(&e);
        assert!(text.lines().count() <= 20, "{text}");
        assert!(text.contains("node node-0, class vg1: Failed"));
        assert!(text.contains("and 992 more"));
        assert!(text.lines().all(|l| l.chars().count() < 300));
    }
}
