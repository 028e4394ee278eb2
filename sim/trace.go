package sim

import "github.com/offcard/offcard/tt"

// hostWriteAllowed is the check of the write path during capture (§5.3).
func (d *Device) hostWriteAllowed() error {
	if d.capturing {
		return &tt.Error{Op: "copy_host_to_device_tensor", Msg: tt.MsgWritesDuringCapture}
	}
	return nil
}

// hostReadAllowed is the check of the read path during capture (§5.3).
func (d *Device) hostReadAllowed() error {
	if d.capturing {
		return &tt.Error{Op: "read", Msg: tt.MsgReadsDuringCapture}
	}
	return nil
}
