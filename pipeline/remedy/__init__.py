"""The remedy ladder: when the int8 model fails the parity gate, repairs tried in order of cost, judged on the tuning split."""
