//! The runtime's `tracing` feature (enabled for this crate): library warnings are
//! WARN events instead of stderr lines, an op run through the CPU fallback runs in a
//! `cpu_fallback` span naming it, and naming a PrivateUse backend is an event.
//! A minimal subscriber installed for this thread records what arrives.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use opal::dispatch::DispatchKey;
use opal::ops;
use opal::{DType, Device, Scalar, Tensor};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// A span opened or an event emitted: level, target, name and fields.
#[derive(Debug)]
struct Seen {
    level: Level,
    target: String,
    name: String,
    fields: Vec<(String, String)>,
}

impl Seen {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

struct Fields(Vec<(String, String)>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_string(), value.to_string()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .push((field.name().to_string(), format!("{value:?}")));
    }
}

#[derive(Clone, Default)]
struct Recorder {
    spans: Arc<Mutex<Vec<Seen>>>,
    events: Arc<Mutex<Vec<Seen>>>,
    next_id: Arc<AtomicU64>,
}

/// Appends what `record` reports of a span or event with `meta` to `list`.
fn push(list: &Mutex<Vec<Seen>>, meta: &Metadata<'_>, record: impl FnOnce(&mut Fields)) {
    let mut fields = Fields(Vec::new());
    record(&mut fields);
    list.lock().unwrap().push(Seen {
        level: *meta.level(),
        target: meta.target().to_string(),
        name: meta.name().to_string(),
        fields: fields.0,
    });
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        push(&self.spans, span.metadata(), |f| span.record(f));
        Id::from_u64(1 + self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        push(&self.events, event.metadata(), |f| event.record(f));
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

#[test]
fn warnings_fallback_and_registration_are_tracing_events() -> opal::Result<()> {
    opal_cpu::init()?;
    opal_emu::init()?;
    let rec = Recorder::default();
    tracing::subscriber::with_default(rec.clone(), || -> opal::Result<()> {
        // Resizing an out= tensor that has elements: PyTorch's deprecation warning.
        let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3])?;
        let out = Tensor::from_slice(&[0.0f32, 0.0], &[2])?;
        ops::add_out(&a, &a, &out)?;
        assert_eq!(out.to_vec::<f32>()?, [2.0, 4.0, 6.0]);
        // emu has no `exp` kernel: the CPU fallback runs it.
        let e = ops::full::call(
            &[2],
            &Scalar::Float(0.0),
            Some(DType::F32),
            None,
            Some(Device::parse("emu")?),
            None,
        )?;
        let r = ops::exp::call(&e)?;
        assert_eq!(r.device(), Device::parse("emu:0")?);
        opal::register_privateuse_backend(DispatchKey::PrivateUse3, "traced")?;
        Ok(())
    })?;

    let events = rec.events.lock().unwrap();
    let warning = events
        .iter()
        .find(|e| e.level == Level::WARN)
        .unwrap_or_else(|| panic!("a WARN event for the resize: {events:?}"));
    assert_eq!(warning.target, "opal");
    assert!(
        warning.field("source").is_some_and(|s| s.contains("add")),
        "{warning:?}"
    );
    assert!(
        warning
            .field("message")
            .is_some_and(|m| m.contains("was resized")),
        "{warning:?}"
    );
    let registered = events
        .iter()
        .find(|e| e.field("name") == Some("traced"))
        .unwrap_or_else(|| panic!("an event for the PrivateUse3 name: {events:?}"));
    assert_eq!(registered.level, Level::DEBUG);
    assert_eq!(registered.field("key"), Some("PrivateUse3"));

    let spans = rec.spans.lock().unwrap();
    assert!(
        spans
            .iter()
            .any(|s| s.name == "cpu_fallback" && s.field("op").is_some_and(|op| op.contains("exp"))),
        "a cpu_fallback span for exp: {spans:?}"
    );
    Ok(())
}
