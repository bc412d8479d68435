//! An example out-of-tree accelerator for Opal, registered under PrivateUse1.
