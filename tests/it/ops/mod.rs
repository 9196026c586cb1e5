//! Operating axon: the CLI, start-up, the debug and monitoring surfaces, the fleet view, the load tool.

mod cli;
mod debug_surface;
mod fleet_view;
mod impact;
mod in_process;
mod istioctl;
mod load_resume;
mod observability;
mod startup;
mod webhook;
