//! Fuzz target `stream`: the per-stream ADS state machine (`axon_xds::protocol::stream::StreamState`)
//! driven by structured request sequences and pushes (`axon_fuzz::stream_input`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: axon_fuzz::stream_input::Input| {
    axon_fuzz::stream_input::run(&input);
});
