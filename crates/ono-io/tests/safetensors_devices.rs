//! The safetensors writer copies tensors of any device to the host chunk by chunk; what it
//! writes reads back exactly with libtorch's own reader (tch), on CPU and (ignored by default)
//! CUDA.

use std::collections::HashMap;

use tch::{Device, Kind, Tensor};

ono_testing::device_tests! {
    fn written_tensors_read_back_exactly(dev) {
        let dir = std::env::temp_dir().join(format!(
            "ono_io_st_dev_{}_{}",
            std::process::id(),
            if dev == Device::Cpu { "cpu" } else { "cuda" }
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.safetensors");
        let opts = (Kind::Float, dev);
        // A non-contiguous view and a 0-d tensor, on the device.
        let m = Tensor::arange(12, opts).reshape([3, 4]).tr();
        let s = Tensor::from(2.5f64).to_device(dev);
        let b = Tensor::arange(5, (Kind::Int64, dev)).ge(2);
        ono_io::safetensors::write(&path, [("m", &m), ("s", &s), ("b", &b)], &HashMap::new())
            .unwrap();
        let back: HashMap<String, Tensor> =
            Tensor::read_safetensors(&path).unwrap().into_iter().collect();
        std::fs::remove_dir_all(&dir).unwrap();
        for (name, want) in [("m", &m), ("s", &s), ("b", &b)] {
            let got = &back[name];
            let want = want.to_device(Device::Cpu);
            assert_eq!(got.kind(), want.kind(), "{name}");
            assert_eq!(got.size(), want.size(), "{name}");
            assert!(got.equal(&want), "{name}: {got:?} != {want:?}");
        }
    }
}
