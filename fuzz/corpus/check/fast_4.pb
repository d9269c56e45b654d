@hb=

render	framedrawmark	depthvZHPP