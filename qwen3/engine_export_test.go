package qwen3

// RopeTablesForTest exposes the engine's rotary tables to the external
// tests, which compare them with ref.RopeTable.
var RopeTablesForTest = ropeTables
