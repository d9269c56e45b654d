hb
	workP