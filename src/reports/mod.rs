//! The end of the data flow: what turns recorded rows and plans into
//! something a person reads. Nothing here solves; every figure comes from
//! the rows a workflow wrote or from replaying a plan in the simulator.

pub mod plot;
pub mod table;
