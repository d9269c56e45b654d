â	
uuidTP